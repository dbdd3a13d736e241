package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemonFile, inside the home, says where the daemon serving that home
// listens. `modeld serve` writes it (atomically: a temporary file renamed into
// place) once it listens, and removes it when it stops; the CLI reads it to
// find its daemon. A daemon killed without a chance to remove it leaves a stale
// file, recognised by its process id no longer running.
const daemonFile = "daemon.json"

// daemonRecord is the content of daemonFile.
type daemonRecord struct {
	PID     int       `json:"pid"`
	URL     string    `json:"url"` // base URL, e.g. http://127.0.0.1:11435
	Home    string    `json:"home"`
	Version string    `json:"version"`
	Started time.Time `json:"started"`
}

// writeDaemonRecord writes rec into home's daemonFile atomically.
func writeDaemonRecord(home string, rec daemonRecord) error {
	if err := writeHomeJSON(home, daemonFile, rec); err != nil {
		return fmt.Errorf("record the daemon's address: %w", err)
	}
	return nil
}

// writeHomeJSON writes v as JSON into home/name atomically: a temporary
// file in home (0600), renamed into place.
func writeHomeJSON(home, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(home, "."+strings.TrimSuffix(name, ".json")+"-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	if err := os.Rename(tmp.Name(), filepath.Join(home, name)); err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	return nil
}

// removeDaemonRecord removes home's daemonFile if it is this process's.
func removeDaemonRecord(home string) error {
	path := filepath.Join(home, daemonFile)
	rec, err := readRecordFile(path)
	if err != nil || rec.PID != os.Getpid() {
		return nil // not ours (or gone): leave it
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the daemon's address record: %w", err)
	}
	return nil
}

func readRecordFile(path string) (daemonRecord, error) {
	var rec daemonRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

// readDaemonRecord reads home's daemonFile; ok is false when there is none,
// it cannot be read, or the process that wrote it is gone (a stale file).
func readDaemonRecord(home string) (rec daemonRecord, ok bool) {
	rec, err := readRecordFile(filepath.Join(home, daemonFile))
	if err != nil || rec.URL == "" || !processAlive(rec.PID) {
		return rec, false
	}
	return rec, true
}

// processAlive reports whether a process with this id runs (signal 0 probes it).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// noDaemonError: no daemon serves the CLI's home.
type noDaemonError struct {
	Home  string
	Where string // where it looked (an address), or ""
	Other string // a daemon found there serves this other home, or ""
}

func (e *noDaemonError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v for the home %s", errNoDaemon, e.Home)
	if e.Other != "" {
		fmt.Fprintf(&b, " (the daemon at %s serves the home %s)", e.Where, e.Other)
	} else if e.Where != "" {
		fmt.Fprintf(&b, " (none answers at %s)", e.Where)
	}
	fmt.Fprintf(&b, "; start one with `modeld serve --home %s`, or name a daemon with --host (MODELD_HOST)", e.Home)
	return b.String()
}

func (e *noDaemonError) Unwrap() error { return errNoDaemon }

// daemonBase finds the base URL of the daemon that serves the CLI's home:
// --host when given, else the address in the home's daemonFile, else the
// --listen address. Before it is used, a daemon is asked which home it serves
// (GET /v1/system): the CLI never acts on a daemon of another home. The
// error wraps errNoDaemon when none serves this home.
func (a *app) daemonBase(ctx context.Context) (string, error) {
	if a.base != "" {
		return a.base, nil
	}
	home := a.cfg.Home
	if a.cfg.Host != "" {
		base, err := hostURL(a.cfg.Host)
		if err != nil {
			return "", fmt.Errorf("invalid host %q: %w", a.cfg.Host, err)
		}
		served, err := a.daemonHome(ctx, base)
		if err != nil {
			if isDialError(err) {
				return "", &noDaemonError{Home: home, Where: base}
			}
			return "", err
		}
		// Named by --host: its home is the one acted on, unless the
		// home was named too and differs.
		if a.cfg.sources["home"] != sourceDefault && !sameHome(served, home) {
			return "", &noDaemonError{Home: home, Where: base, Other: served}
		}
		a.base = base
		return base, nil
	}
	var candidates []string
	rec, hasRecord := readDaemonRecord(home)
	if hasRecord {
		candidates = append(candidates, rec.URL)
	}
	if u := a.daemonURL(); !hasRecord || rec.URL != u {
		candidates = append(candidates, u)
	}
	miss := &noDaemonError{Home: home}
	for i, base := range candidates {
		served, err := a.daemonHome(ctx, base)
		switch {
		case err != nil && hasRecord && i == 0 && !isDialError(err):
			return "", err // this home's daemon answers, but not with its home (a key missing)
		case err != nil:
			if miss.Other == "" {
				miss.Where = base
			}
			continue // nothing listens there (a stale record), or not a daemon this CLI may use
		case !sameHome(served, home):
			miss.Where, miss.Other = base, served
			continue
		}
		a.base = base
		return base, nil
	}
	return "", miss
}

// hostURL turns a --host value (host:port, or an http URL) into a base URL.
func hostURL(h string) (string, error) {
	if strings.HasPrefix(h, "http://") || strings.HasPrefix(h, "https://") {
		return strings.TrimRight(h, "/"), nil
	}
	if _, _, err := net.SplitHostPort(h); err != nil {
		return "", errors.New("want host:port or an http(s) URL")
	}
	return "http://" + h, nil
}

// daemonHome asks the daemon at base which home it serves.
func (a *app) daemonHome(ctx context.Context, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/system", nil)
	if err != nil {
		return "", err
	}
	a.authorize(req)
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, DisableKeepAlives: true}}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close() //nolint:errcheck // read below
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		e := daemonErrorOf(res.StatusCode, b)
		e.Message = "the daemon at " + base + " answered " + res.Status + ": " + e.Message
		return "", e
	}
	var sys struct {
		Config struct {
			Home struct {
				Value string `json:"value"`
			} `json:"home"`
		} `json:"config"`
	}
	if err := json.Unmarshal(b, &sys); err != nil || sys.Config.Home.Value == "" {
		return "", fmt.Errorf("the server at %s is not a modeld daemon (its /v1/system names no home)", base)
	}
	return sys.Config.Home.Value, nil
}

// isDialError reports whether err is a failure to connect at all.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial")
}

// sameHome compares two home paths after resolving them.
func sameHome(a, b string) bool {
	return canonicalPath(a) == canonicalPath(b)
}

func canonicalPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return filepath.Clean(p)
}

// recordDaemon writes the daemon's record into its home, for the CLI.
func (a *app) recordDaemon(addr net.Addr) error {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	home, err := filepath.Abs(a.cfg.Home)
	if err != nil {
		home = a.cfg.Home
	}
	return writeDaemonRecord(a.cfg.Home, daemonRecord{
		PID: os.Getpid(), URL: "http://" + net.JoinHostPort(host, port), Home: home,
		Version: modeldVersion(), Started: time.Now().UTC(),
	})
}
