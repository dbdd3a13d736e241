package llama

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/modeld/modeld/backends/llama/wire"
)

// ErrQuantize: the quantizer child failed or ended without finishing; the
// error that wraps it says why (its last error line, or how it died).
var ErrQuantize = errors.New("quantizer failed")

// Quantizer runs llama.cpp's quantizer in a child process (`modeld
// quantize`, package runner), so that native code reading a hostile file
// can abort only the child.
type Quantizer struct {
	// Command is the program and leading arguments that run `modeld
	// quantize` (a runner wrapper, the executable, the command name); the
	// quantizer's flags are appended.
	Command []string
	LibDir  string // directory of the llama.cpp libraries
	Threads int    // 0: llama.cpp's default
}

// Quantize writes dst, the copy of the GGUF model src quantized to typ
// (wire.ParseQuantType), calling progress with the tensors done and their
// total after each tensor. dst is the child's to write: on any error the
// caller removes it. Cancelling ctx kills the child.
func (q Quantizer) Quantize(ctx context.Context, src, dst, typ string, progress func(done, total int)) error {
	t, err := wire.ParseQuantType(typ)
	if err != nil {
		return err
	}
	if len(q.Command) == 0 {
		return errors.New("quantize: no command to run the quantizer")
	}
	argv := append(append([]string{}, q.Command...),
		"--lib-dir", q.LibDir, "--in", src, "--out", dst, "--type", t.Name, "--threads", strconv.Itoa(q.Threads))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = runnerSysProcAttr()
	tail := &tailBuffer{max: stderrTail}
	errw := &lineWriter{fn: tail.addLine}
	cmd.Stderr = errw
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	// The parent-death signal is tied to the thread that forks the child:
	// one locked thread starts it and waits for it.
	type result struct {
		done bool
		err  error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			res <- result{err: fmt.Errorf("quantize: start: %w", err)}
			return
		}
		done := readQuantizeOutput(out, progress)
		werr := cmd.Wait()
		errw.flush()
		res <- result{done: done, err: werr}
	}()
	r := <-res
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.err == nil && r.done {
		return nil
	}
	why := lastErrorLine(tail.String())
	var ee *exec.ExitError
	switch {
	case errors.As(r.err, &ee) && !ee.Exited() && why == "":
		return fmt.Errorf("%w: the quantizer process died (%v)", ErrQuantize, ee)
	case errors.As(r.err, &ee) && !ee.Exited():
		return fmt.Errorf("%w: the quantizer process died (%v): %s", ErrQuantize, ee, why)
	case r.err != nil && !errors.As(r.err, &ee):
		return r.err
	case why == "":
		return fmt.Errorf("%w: the quantizer process ended without finishing (%v)", ErrQuantize, r.err)
	}
	return fmt.Errorf("%w: %s", ErrQuantize, why)
}

// readQuantizeOutput reads the child's stdout to its end, reporting
// progress, and says whether it reported that it finished.
func readQuantizeOutput(r io.Reader, progress func(done, total int)) bool {
	sc := bufio.NewScanner(r)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == wire.QuantizeDone {
			done = true
			continue
		}
		if d, t, ok := wire.ParseQuantizeProgress(line); ok && progress != nil {
			progress(d, t)
		}
	}
	_, _ = io.Copy(io.Discard, r)
	return done
}

// lastErrorLine is the child's own error (the last line the command
// printed as "modeld: …"), else the last line of its stderr that reads as
// an error, else its last line.
func lastErrorLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "modeld: "); ok {
			return l
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.Contains(strings.ToLower(l), "error") || strings.Contains(l, "failed") {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
