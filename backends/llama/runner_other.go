//go:build !linux

package llama

import "syscall"

// runnerSysProcAttr: without a parent-death signal the runner relies on its
// own guards (stdin reaching EOF, its parent process id changing).
func runnerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
