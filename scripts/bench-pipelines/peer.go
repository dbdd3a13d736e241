package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
)

// peerSide is transformers.js in a node child process running peer.mjs, driven
// one command per line over its stdin; it answers one JSON line per command.
type peerSide struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	info peerReady
}

// peerReady is peer.mjs's first line.
type peerReady struct {
	Ready   bool    `json:"ready"`
	Version string  `json:"transformers_js"`
	Threads int     `json:"threads"`
	LoadMs  float64 `json:"load_ms"`
}

// peerAnswer is any later line.
type peerAnswer struct {
	Rate  float64   `json:"rate"`
	First []float64 `json:"first"`
	Error string    `json:"error"`
}

// startPeer runs `node script --model dir --texts texts ...` and waits until it
// has loaded the model and warmed up.
func startPeer(node, script, dir, texts string, threads int, wl workload) (*peerSide, error) {
	cmd := exec.Command(node, script, "--model", dir, "--texts", texts,
		"--threads", strconv.Itoa(threads), "--calls", strconv.Itoa(wl.calls),
		"--batch", strconv.Itoa(wl.batch), "--concurrency", strconv.Itoa(wl.concurrency))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start peer: %w", err)
	}
	p := &peerSide{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 0, 64<<10), 16<<20)
	if err := p.read(&p.info); err != nil || !p.info.Ready {
		return nil, errors.Join(fmt.Errorf("peer did not start: %w", err), p.close())
	}
	return p, nil
}

func (p *peerSide) read(v any) error {
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(p.out.Bytes(), v)
}

// ask sends one command and reads its answer.
func (p *peerSide) ask(command string) (peerAnswer, error) {
	var a peerAnswer
	if _, err := fmt.Fprintln(p.in, command); err != nil {
		return a, fmt.Errorf("peer %s: %w", command, err)
	}
	if err := p.read(&a); err != nil {
		return a, fmt.Errorf("peer %s: %w", command, err)
	}
	if a.Error != "" {
		return a, fmt.Errorf("peer %s: %s", command, a.Error)
	}
	return a, nil
}

func (p *peerSide) first(context.Context) ([]float64, error) {
	a, err := p.ask("first")
	return a.First, err
}

func (p *peerSide) batch(context.Context) (float64, error) {
	a, err := p.ask("batch")
	return a.Rate, err
}

func (p *peerSide) concurrent(context.Context) (float64, error) {
	a, err := p.ask("concurrent")
	return a.Rate, err
}

// close asks the peer to quit and waits for it.
func (p *peerSide) close() error {
	_, _ = fmt.Fprintln(p.in, "quit")
	cerr := p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("peer: %w", err)
	}
	return cerr
}
