package main

// The parsers and the shown forms of setting values.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/modeld/modeld/internal/duration"
)

// durationText writes d as the settings read it, without zero trailing units
// ("5m", not "5m0s").
func durationText(d time.Duration) string {
	t := d.String()
	if strings.HasSuffix(t, "m0s") {
		t = t[:len(t)-2]
	}
	if strings.HasSuffix(t, "h0m") {
		t = t[:len(t)-2]
	}
	return t
}

// sizeText shows a size setting: "auto" for 0, else its bytes.
func sizeText(n int64) any {
	if n == 0 {
		return "auto"
	}
	return n
}

// listText shows a list setting: [] rather than null when empty.
func listText(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func parseListen(c *Config, v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 0-65535", port)
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q is not an IP address or localhost", host)
	}
	c.Listen = v
	return nil
}

// readKeyFile reads an API key: the first line of the file, trimmed.
func readKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	key := strings.TrimSpace(line)
	if key == "" {
		return "", errors.New("the file's first line is empty")
	}
	return key, nil
}

func parsePositiveDuration(dst *time.Duration, v string) error {
	var d time.Duration
	if err := parseDuration(&d, v, false); err != nil {
		return err
	}
	if d == 0 {
		return errors.New("must be more than 0")
	}
	*dst = d
	return nil
}

func parseTasks(c *Config, v string) error {
	c.GPUTasks = nil
	if strings.TrimSpace(v) == "none" {
		return nil
	}
	for _, t := range splitList(v) {
		ok := false
		for _, k := range knownTasks {
			ok = ok || t == k
		}
		if !ok {
			return fmt.Errorf("unknown task %q (known: %s)", t, strings.Join(knownTasks, ", "))
		}
		c.GPUTasks = append(c.GPUTasks, t)
	}
	return nil
}

func oneOf(dst *string, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			*dst = v
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
}

func parseInt(dst *int, v string, min int) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if n < min {
		return fmt.Errorf("must be at least %d", min)
	}
	*dst = n
	return nil
}

// parseDuration reads a duration as duration.Parse does: the same syntax
// as a request's keep_alive.
func parseDuration(dst *time.Duration, v string, negativeOK bool) error {
	d, err := duration.Parse(v)
	if err != nil {
		return err
	}
	if d < 0 && !negativeOK {
		return fmt.Errorf("must not be negative")
	}
	*dst = d
	return nil
}

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize reads "auto" (0), a byte count, or a number with a unit (16GiB, 800MB).
func parseSize(dst *int64, v string) error {
	s := strings.ToLower(strings.TrimSpace(v))
	if s == "auto" {
		*dst = 0
		return nil
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return fmt.Errorf("unknown size unit %q (use B, KB, MB, GB, KiB, MiB, GiB)", unit)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return fmt.Errorf("not a size (e.g. 16GiB, 800MB, auto)")
	}
	if f < 0 {
		return fmt.Errorf("must not be negative")
	}
	*dst = int64(f * float64(mult))
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseRunnerWrapper reads the runner wrapper: words split on spaces, the
// first a program that must exist now, not at the first model load.
func parseRunnerWrapper(c *Config, v string) error {
	c.RunnerWrapper = strings.Fields(v)
	if len(c.RunnerWrapper) == 0 {
		c.RunnerWrapper = nil
		return nil
	}
	if _, err := exec.LookPath(c.RunnerWrapper[0]); err != nil {
		return fmt.Errorf("program %q: %w", c.RunnerWrapper[0], err)
	}
	return nil
}
