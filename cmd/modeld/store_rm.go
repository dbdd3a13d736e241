package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/models"
)

func newRemoveCommand(a *app) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete models and the files no other model uses",
		Long: `Delete models. When a daemon serves this home, it unloads the model and
deletes it; a model answering requests is refused unless --force, which waits for
those requests and then unloads it. Without a daemon the store is changed
directly. Files shared with other models are kept.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd)
			defer stop()
			st, err := a.openStore()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				if err := a.removeOne(ctx, st, id, force); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "wait for the daemon's requests on the model, unload it, then delete it")
	return cmd
}

// removeOne deletes id through the daemon when one listens, else directly.
func (a *app) removeOne(ctx context.Context, st *models.Store, id string, force bool) error {
	if _, err := models.ParseID(id); err != nil {
		return err
	}
	done, err := a.removeViaDaemon(ctx, id, force)
	if err != nil {
		return err
	}
	if done {
		return nil
	}
	rep, err := st.Remove(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "deleted %s (freed %s%s)\n", rep.ID, humanBytes(rep.Freed), keptNote(len(rep.Kept)))
	if rep.CorruptManifest {
		fmt.Fprintln(a.stdout, "its manifest was corrupt; `modeld prune` frees the files it no longer names")
	}
	return nil
}

func keptNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d files kept, other models use them", n)
}

// removeViaDaemon asks a listening daemon to unload and delete id. done is
// false when no daemon (or one without the model routes) answers.
func (a *app) removeViaDaemon(ctx context.Context, id string, force bool) (done bool, err error) {
	base, err := a.daemonBase(ctx)
	if errors.Is(err, errNoDaemon) {
		return false, nil // no daemon serves this home: change the store directly
	}
	if err != nil {
		return false, err
	}
	u := base + "/v1/models/" + id
	if force {
		u += "?force=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return false, err
	}
	a.authorize(req)
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		if isDialError(err) {
			return false, nil // the daemon went away: change the store directly
		}
		return false, fmt.Errorf("ask the daemon at %s to delete %s: %w", base, id, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read below
	var body struct {
		ID    string `json:"id"`
		Freed int64  `json:"freed_bytes"`
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) // status decides below
	switch {
	case resp.StatusCode == http.StatusOK:
		fmt.Fprintf(a.stdout, "deleted %s (freed %s; unloaded by the daemon)\n", body.ID, humanBytes(body.Freed))
		return true, nil
	case resp.StatusCode == http.StatusNotFound && body.Error.Code != "model_not_found":
		return false, nil // a daemon without the model routes
	case resp.StatusCode == http.StatusConflict && body.Error.Code == "model_in_use":
		return false, fmt.Errorf("%s is in use by the daemon: %s\nrun `modeld rm --force %s` to wait for its requests, unload it and delete it", id, body.Error.Message, id)
	}
	msg := body.Error.Message
	if msg == "" {
		msg = resp.Status
	}
	return false, fmt.Errorf("daemon refused to delete %s: %s%s", id, msg, keyHint(resp.StatusCode))
}
