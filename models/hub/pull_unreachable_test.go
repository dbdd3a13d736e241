package hub

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
)

// A hub whose name does not resolve, or where nothing listens, fails the
// pull at once: no retry waits (a retry cannot help there), and the error
// says what happened.
func TestPullFailsFastWhenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct{ endpoint, want string }{
		{closed, "connection refused"},
		{"http://no-such-host.invalid", "no-such-host.invalid"},
	} {
		e := newPullEnv(t, func(c *PullConfig) { c.Endpoint = tc.endpoint; c.MaxRetries = 5 })
		_, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pull from %s = %v, want an error naming %q", tc.endpoint, err, tc.want)
		}
		if s := e.sleeps.got(); len(s) != 0 {
			t.Errorf("pull from %s waited %v to retry; want no retry", tc.endpoint, s)
		}
		var dns *net.DNSError
		if tc.endpoint != closed && !errors.As(err, &dns) {
			t.Errorf("pull from %s: %v is not a name resolution error", tc.endpoint, err)
		}
	}
}

// A connection refused while a request is already being retried (a server
// restarting after a 502) is retried: only a first failure counts as
// unreachable.
func TestUnreachableOnlyFirst(t *testing.T) {
	cfg := PullConfig{MaxRetries: 3, BackoffBase: 1, BackoffMax: 1}
	sleeps := &sleepRec{}
	cfg.Sleep = sleeps.sleep
	b := backoff{cfg: &cfg}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	if err := b.wait(context.Background(), refused, false); err == nil {
		t.Fatal("a first refused connection was retried")
	}
	if err := b.wait(context.Background(), &statusError{Code: 502}, false); err != nil {
		t.Fatalf("a 502 was not retried: %v", err)
	}
	if err := b.wait(context.Background(), refused, false); err != nil {
		t.Fatalf("a refused connection during retries was not retried: %v", err)
	}
	if n := len(sleeps.got()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
}
