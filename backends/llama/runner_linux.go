package llama

import "syscall"

// runnerSysProcAttr: the kernel kills the runner with SIGKILL when the
// thread that started it dies (the daemon's process included, even on
// SIGKILL), and the runner gets its own process group, so a Ctrl-C at the
// daemon's terminal reaches the daemon alone, which then stops its runners
// in order.
func runnerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
