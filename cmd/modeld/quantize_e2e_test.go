package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/models"
)

// quantizableOptions is a generated model whose every weight row is a
// multiple of 256 long, so that the K quantizations apply to every matrix
// (llama.cpp keeps rows that do not fit the block in another type).
func quantizableOptions() ggufgen.Options {
	o := ggufgen.Tiny(ggufgen.SPM)
	o.Embd, o.FF, o.Heads, o.HeadsKV = 256, 512, 4, 4
	o.Type = ggufgen.F16
	return o
}

// modeldCLI runs the test binary as the modeld command in a child process,
// the way a user runs it (its own children, the quantizer, inherit that).
func modeldCLI(t *testing.T, home string, extraEnv []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home,
		"MODELD_LISTEN="+freeAddr(t), "MODELD_LIB_DIR="+testenv.LibDir(t)), extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// storeLeftovers lists what an import may leave in the store: manifests,
// blobs and partial files (lock files aside).
func storeLeftovers(t *testing.T, home string) []string {
	t.Helper()
	var left []string
	for _, dir := range []string{"manifests", "blobs", "partials"} {
		root := filepath.Join(home, "models", dir)
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".lock") {
				left = append(left, strings.TrimPrefix(p, home+"/"))
			}
			return nil
		})
	}
	return left
}

// `modeld import --quantize` stores what llama.cpp's quantizer made of a
// generated F16 model, says so in the model's metadata, and the result
// loads in a real runner and generates.
func TestImportQuantizeLoadsAndGenerates(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "q-F16.gguf")
	if err := ggufgen.WriteFile(src, quantizableOptions()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"Q8_0", "q4_k_m"} {
		id := "q/" + strings.ToLower(typ)
		out, errs, err := modeldCLI(t, home, nil, "import", src, "--name", id, "--quantize", typ)
		if err != nil {
			t.Fatalf("import --quantize %s: %v\n%s\n%s", typ, err, out, errs)
		}
		if !strings.Contains(out, "quantizing q-F16.gguf to "+strings.ToUpper(typ)) {
			t.Errorf("import --quantize %s printed no progress:\n%s", typ, out)
		}
	}
	st, err := models.Open(filepath.Join(home, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]struct {
		typ, file string
		maxRatio  float64 // stored size ÷ F16 size at most
	}{
		"q/q8_0":   {"Q8_0", "q-Q8_0.gguf", 0.6},
		"q/q4_k_m": {"Q4_K_M", "q-Q4_K_M.gguf", 0.4},
	} {
		m, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if m.GGUF == nil || m.GGUF.FileType != want.typ || m.Source.Quantized != want.typ || m.GGUF.File != want.file {
			t.Errorf("%s: manifest says file %+v, source %+v; want %s in %s", id, m.GGUF, m.Source, want.typ, want.file)
		}
		if r := float64(m.Size()) / float64(fi.Size()); r > want.maxRatio {
			t.Errorf("%s: %d bytes, %.2f of the F16 file's %d (want at most %.2f)", id, m.Size(), r, fi.Size(), want.maxRatio)
		}
	}
	out, err := runCLI(t, map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}, "ls", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []listEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	quants := map[string]string{}
	for _, e := range entries {
		quants[e.ID] = e.Quantization
	}
	if quants["q/q8_0"] != "Q8_0" || quants["q/q4_k_m"] != "Q4_K_M" {
		t.Errorf("ls --json quantizations: %v", quants)
	}

	_, base, _ := startDaemon(t, home)
	client := sdk(base)
	for _, id := range []string{"q/q8_0", "q/q4_k_m"} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		resp, err := client.Chat.Completions.New(ctx, chatParams(id, 8))
		cancel()
		if err != nil {
			t.Fatalf("chat with %s: %v", id, err)
		}
		t.Logf("%s: %q (%d tokens)", id, resp.Choices[0].Message.Content, resp.Usage.CompletionTokens)
		if len(resp.Choices) != 1 || resp.Usage.CompletionTokens == 0 || resp.Usage.PromptTokens == 0 {
			t.Errorf("chat with %s: %+v", id, resp)
		}
		again, err := client.Chat.Completions.New(context.Background(), chatParams(id, 8))
		if err != nil {
			t.Fatal(err)
		}
		if again.Choices[0].Message.Content != resp.Choices[0].Message.Content {
			t.Errorf("%s: greedy answers differ: %q then %q", id, resp.Choices[0].Message.Content, again.Choices[0].Message.Content)
		}
	}
}

// What a quantization cannot make is refused with one clear error, and the
// store is left as it was: no manifest, no blob, no partial file.
func TestImportQuantizeRefusals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := ggufgen.WriteFile(good, quantizableOptions()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.gguf")
	if err := os.WriteFile(truncated, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	// A file whose header and metadata are valid, of an architecture
	// llama.cpp does not know: only the native quantizer finds it out.
	alien := filepath.Join(dir, "alien.gguf")
	o := quantizableOptions()
	if err := ggufgen.WriteFile(alien, o); err != nil {
		t.Fatal(err)
	}
	ab, err := os.ReadFile(alien)
	if err != nil {
		t.Fatal(err)
	}
	ab = bytes.Replace(ab, []byte("\x05\x00\x00\x00\x00\x00\x00\x00llama"), []byte("\x05\x00\x00\x00\x00\x00\x00\x00lla_a"), 1)
	ab = bytes.ReplaceAll(ab, []byte("llama."), []byte("lla_a."))
	if err := os.WriteFile(alien, ab, 0o644); err != nil {
		t.Fatal(err)
	}
	// A quantizer process that dies of a signal (what a native crash on a
	// hostile file looks like from the command).
	crash := filepath.Join(dir, "crash.sh")
	if err := os.WriteFile(crash, []byte("#!/bin/sh\nkill -SEGV $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A model quantized already (by a first import --quantize).
	qhome := t.TempDir()
	if out, errs, err := modeldCLI(t, qhome, nil, "import", good, "--name", "q/first", "--quantize", "Q4_K_M"); err != nil {
		t.Fatalf("first quantization: %v\n%s\n%s", err, out, errs)
	}
	qst, err := models.Open(filepath.Join(qhome, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	qm, err := qst.Get("q/first")
	if err != nil {
		t.Fatal(err)
	}
	qblob, err := qst.FilePath(qm, qm.GGUF.File)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := os.ReadFile(qblob)
	if err != nil {
		t.Fatal(err)
	}
	quantized := filepath.Join(dir, "quantized.gguf")
	if err := os.WriteFile(quantized, qb, 0o644); err != nil {
		t.Fatal(err)
	}
	onnxDir := filepath.Join(dir, "onnx-folder")
	if err := os.MkdirAll(onnxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"unknown type", []string{good, "--quantize", "Q3_XX"}, nil,
			[]string{`unknown quantization "Q3_XX"`, "Q4_K_M", "Q8_0"}},
		{"truncated file", []string{truncated, "--quantize", "Q8_0"}, nil,
			[]string{"truncated.gguf"}},
		{"architecture llama.cpp does not know", []string{alien, "--quantize", "Q8_0"}, nil,
			[]string{"quantize alien.gguf to Q8_0: quantizer failed: llama.cpp: unknown model architecture", "lla_a"}},
		{"quantizer crashes", []string{good, "--quantize", "Q4_K_M"}, []string{"MODELD_RUNNER_WRAPPER=" + crash},
			[]string{"quantize good.gguf to Q4_K_M: quantizer failed: the quantizer process died", "segmentation fault"}},
		{"quantized already", []string{quantized, "--quantize", "Q8_0"}, nil,
			[]string{"quantized.gguf is Q4_K_M already; --quantize needs an F32, F16 or BF16 model"}},
		{"not a GGUF file", []string{onnxDir, "--quantize", "Q8_0"}, nil,
			[]string{"--quantize applies to GGUF model files"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			args := append([]string{"import", "--name", "bad/model"}, tc.args...)
			_, stderr, err := modeldCLI(t, home, tc.env, args...)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("import exited with %v, want status 1\n%s", err, stderr)
			}
			t.Logf("stderr: %s", stderr)
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "goroutine ") || strings.Count(strings.TrimSpace(stderr), "\n") > 2 {
				t.Errorf("stderr is not one clear error:\n%s", stderr)
			}
			if left := storeLeftovers(t, home); len(left) > 0 {
				t.Errorf("the refused import left %v in the store", left)
			}
		})
	}
}

// Ctrl-C while the quantizer runs ends the import with nothing stored, even
// when the quantized file was already complete in the store's partials.
func TestImportQuantizeInterrupted(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	if err := ggufgen.WriteFile(src, quantizableOptions()); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "written")
	wrapper := filepath.Join(dir, "slow.sh")
	script := "#!/bin/sh\n\"$@\" || exit $?\ntouch " + mark + "\nexec sleep 600\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "import", src, "--name", "q/m", "--quantize", "Q8_0")
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LISTEN="+freeAddr(t),
		"MODELD_LIB_DIR="+testenv.LibDir(t), "MODELD_RUNNER_WRAPPER="+wrapper)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The mark says the quantizer wrote its whole output; wait for it
	// (a ceiling, not a timing).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("import ended before it was interrupted: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the quantizer never finished its output")
		}
	}
	partials, _ := filepath.Glob(filepath.Join(home, "models", "partials", "*.partial"))
	if len(partials) != 1 {
		t.Fatalf("want the quantized output in one partial file before the interrupt, have %v", partials)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	if err == nil {
		t.Fatalf("interrupted import succeeded\n%s", stderr.String())
	}
	if left := storeLeftovers(t, home); len(left) > 0 {
		t.Errorf("the interrupted import left %v in the store", left)
	}
}
