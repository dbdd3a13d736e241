package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// errNoDaemon says the daemon is not listening where the configuration says.
var errNoDaemon = errors.New("modeld is not running")

// daemonCall sends a JSON request to the running daemon and decodes its JSON
// answer into out. An OpenAI-shaped error answer becomes an error with its message.
func (a *app) daemonCall(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	base, err := a.daemonBase(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return err
	}
	a.authorize(req)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 10 * time.Minute}
	res, err := client.Do(req)
	if err != nil {
		if isDialError(err) {
			return &noDaemonError{Home: a.cfg.Home, Where: base}
		}
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 400 {
		return daemonErrorOf(res.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// daemonError is an error answer of the daemon.
type daemonError struct {
	Status  int
	Message string
}

func (e *daemonError) Error() string { return e.Message }

// daemonErrorOf reads an OpenAI-shaped error answer.
func daemonErrorOf(status int, b []byte) *daemonError {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return &daemonError{Status: status, Message: e.Error.Message + keyHint(status)}
	}
	return &daemonError{Status: status, Message: string(b)}
}

// daemonURL is the base URL at which the CLI reaches the daemon: a listen
// address on every interface is reached on loopback (the daemon answers only
// to loopback names and addresses, its own address and the allowed hosts).
func (a *app) daemonURL() string {
	host, port, err := net.SplitHostPort(a.cfg.Listen)
	if err != nil {
		return "http://" + a.cfg.Listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// authorize adds the configured API key to a request for the daemon.
func (a *app) authorize(req *http.Request) {
	if a.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	}
}

// keyHint completes the daemon's 401 with how the CLI sends a key.
func keyHint(status int) string {
	if status != http.StatusUnauthorized {
		return ""
	}
	return " (give the CLI the daemon's key with --api-key, MODELD_API_KEY or --api-key-file)"
}
