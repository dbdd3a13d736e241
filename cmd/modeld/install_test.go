package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// make install puts modeld into PREFIX/bin when PREFIX is given, else
// into GOBIN (DESTDIR in front), with the version built in.
func TestMakeInstallTarget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"PREFIX=/opt/m"}, "", `"/opt/m/bin/modeld"`},
		{[]string{"PREFIX=/usr/local", "DESTDIR=/stage"}, "", `"/stage/usr/local/bin/modeld"`},
		{nil, "GOBIN=/somewhere/bin", `"/somewhere/bin/modeld"`},
	} {
		cmd := exec.Command("make", append([]string{"-n", "-C", "../..", "install"}, tc.args...)...)
		cmd.Env = os.Environ()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n install %v: %v\n%s", tc.args, err, out)
		}
		if !strings.Contains(string(out), "install -m 0755 bin/modeld "+tc.want) || !strings.Contains(string(out), "-X main.version=") {
			t.Errorf("make -n install %v %s:\n%s\nwant it installed as %s with the version", tc.args, tc.env, out, tc.want)
		}
	}
}

// The README's Quickstart works pasted as one block: modeld is installed
// and on the PATH, and `modeld wait` follows `modeld serve &` before any
// command that needs the daemon.
func TestREADMEQuickstartWaits(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Quickstart, offline")
	if i < 0 {
		t.Fatal("README.md has no Quickstart")
	}
	block := readme[i:]
	block = block[strings.Index(block, "```sh\n")+6:]
	block = block[:strings.Index(block, "```")]
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		if c, _, _ := strings.Cut(line, "#"); strings.TrimSpace(c) != "" && !strings.HasPrefix(line, " ") {
			cmds = append(cmds, strings.TrimSpace(c))
		}
	}
	at := func(prefix string) int {
		for i, c := range cmds {
			if strings.HasPrefix(c, prefix) {
				return i
			}
		}
		t.Fatalf("the Quickstart has no %q:\n%s", prefix, block)
		return -1
	}
	install, serve, wait := at("make bootstrap install"), at("modeld serve &"), at("modeld wait")
	if !(install < serve && serve+1 == wait) {
		t.Errorf("the Quickstart must install, serve in the background, then wait:\n%s", block)
	}
	for i, c := range cmds {
		if strings.Contains(c, "bin/modeld") || strings.Contains(c, "make run") {
			t.Errorf("the Quickstart runs %q: use the installed modeld", c)
		}
		if i > serve && i < wait && (strings.HasPrefix(c, "modeld") || strings.HasPrefix(c, "curl")) {
			t.Errorf("%q runs before the daemon is waited for", c)
		}
	}
}
