package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newLaunchCommand) }

func newLaunchCommand(a *app) *cobra.Command {
	var undo, configOnly bool
	cmd := &cobra.Command{
		Use:   "launch claude|codex|opencode [MODEL] [-- ARGS...]",
		Short: "Start an agent CLI (Claude Code, Codex, opencode) on this daemon's model",
		Long: `launch points an agent CLI at the running daemon and starts it: Claude Code
through its environment (base URL, key, the model for every tier, the context
window), Codex through a profile ($CODEX_HOME/modeld.config.toml and a model
catalog beside it, used with codex -p modeld), opencode through a modeld
provider in its config file (~/.config/opencode/opencode.json). MODEL is a
model id or alias of the daemon (default: its first chat model). Arguments
after -- go to the CLI.

Files it changes are backed up first (FILE.modeld-backup); --undo (or
--restore) puts them back byte for byte and removes those it created.
--config-only writes the files and prints the environment instead of starting
the CLI.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ag, err := findAgent(args[0])
			if err != nil {
				return err
			}
			model, extra := "", []string(nil)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				args, extra = args[:d], args[d:]
			}
			if len(args) > 2 {
				return fmt.Errorf("launch takes a CLI and at most one model (%d arguments before --); put the CLI's own arguments after --", len(args))
			}
			if len(args) > 1 {
				model = args[1]
			}
			if undo {
				if model != "" || extra != nil {
					return errors.New("--undo takes no model and no arguments")
				}
				return a.undoLaunch(ag)
			}
			return a.launch(cmd, ag, model, extra, configOnly)
		},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "restore the files the last launch of this CLI changed, and remove those it created")
	cmd.Flags().BoolVar(&undo, "restore", false, "the same as --undo")
	cmd.Flags().BoolVar(&configOnly, "config-only", false, "write the CLI's settings and print its environment; do not start it")
	return cmd
}

// launchModel is one model of the daemon's /v1/models as launch reads it.
type launchModel struct {
	ID            string   `json:"id"`
	Task          string   `json:"task"`
	ContextLength int      `json:"context_length"`
	Aliases       []string `json:"aliases"`
	Modalities    []string `json:"input_modalities"`
}

// pickModel finds want (an id or alias) among ms, or the first chat model
// when want is "".
func pickModel(ms []launchModel, want string) (launchModel, error) {
	var chat []string
	for _, m := range ms {
		if m.Task != "chat" {
			continue
		}
		if want == "" || m.ID == want || slices.Contains(m.Aliases, want) {
			if want != "" && m.ID != want {
				m.ID = want // the CLI asks for the alias; the daemon resolves it
			}
			return m, nil
		}
		chat = append(chat, m.ID)
	}
	if len(chat) == 0 && want == "" {
		return launchModel{}, errors.New("the daemon has no chat model: import or pull one first")
	}
	return launchModel{}, fmt.Errorf("the daemon has no chat model %q (chat models: %s)", want, strings.Join(chat, ", "))
}

func (a *app) launch(cmd *cobra.Command, ag agent, want string, extra []string, configOnly bool) error {
	ctx := cmd.Context()
	base, err := a.daemonBase(ctx)
	if err != nil {
		return err
	}
	var list struct {
		Data []launchModel `json:"data"`
	}
	if err := a.daemonCall(ctx, "GET", "/v1/models", nil, &list); err != nil {
		return err
	}
	m, err := pickModel(list.Data, want)
	if err != nil {
		return err
	}
	home := a.getenv("HOME")
	if home == "" {
		if home, err = os.UserHomeDir(); err != nil {
			return err
		}
	}
	t := launchTarget{Base: base, Key: a.cfg.APIKey, Model: m.ID, Context: m.ContextLength,
		Vision: slices.Contains(m.Modalities, "image"), Home: home, getenv: a.getenv}
	s, err := ag.settings(t)
	if err != nil {
		return err
	}
	written, err := a.applyLaunch(ag, s.Files)
	if err != nil {
		return err
	}
	for _, p := range written {
		fmt.Fprintf(a.stderr, "wrote %s\n", p)
	}
	argv := append(append([]string{ag.command}, s.Args...), extra...)
	if configOnly {
		for _, e := range s.Env {
			k, v, _ := strings.Cut(e, "=")
			fmt.Fprintf(a.stdout, "export %s=%s\n", k, shellQuote(v))
		}
		fmt.Fprintln(a.stdout, strings.Join(shellWords(argv), " "))
		return nil
	}
	path, err := exec.LookPath(ag.command)
	if err != nil {
		return fmt.Errorf("%s is not installed (%s): %w", ag.command, ag.install, err)
	}
	fmt.Fprintf(a.stderr, "starting %s on %s with %s (undo the settings with modeld launch %s --undo)\n", ag.command, base, m.ID, ag.name)
	return syscall.Exec(path, argv, mergeEnv(os.Environ(), s.Env))
}

// mergeEnv is base with the variables of over set to over's values: a
// variable the user had is replaced, not repeated (a C program's getenv
// reads the first of two).
func mergeEnv(base, over []string) []string {
	set := map[string]bool{}
	for _, e := range over {
		k, _, _ := strings.Cut(e, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(over))
	for _, e := range base {
		if k, _, _ := strings.Cut(e, "="); !set[k] {
			out = append(out, e)
		}
	}
	return append(out, over...)
}

// launchRecord is what launch wrote for one CLI, so --undo can put it back:
// $MODELD_HOME/launch/NAME.json.
type launchRecord struct {
	Files []launchedFile `json:"files"`
}

// launchedFile is a file launch wrote and where its earlier contents are
// ("" when it did not exist before the first launch).
type launchedFile struct {
	Path   string `json:"path"`
	Backup string `json:"backup,omitempty"`
}

const backupSuffix = ".modeld-backup"

func (a *app) launchRecordPath(ag agent) string {
	return filepath.Join(a.cfg.Home, "launch", ag.name+".json")
}

func (a *app) readLaunchRecord(ag agent) (launchRecord, bool, error) {
	var r launchRecord
	b, err := os.ReadFile(a.launchRecordPath(ag))
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, false, fmt.Errorf("launch record %s: %w", a.launchRecordPath(ag), err)
	}
	return r, true, nil
}

func (a *app) writeLaunchRecord(ag agent, r launchRecord) error {
	p := a.launchRecordPath(ag)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o600)
}

// applyLaunch writes files. A file's contents before the first launch of
// the CLI are kept (FILE.modeld-backup, with its mode) and the record says
// where, before anything is written, so --undo works after a failure half
// way; a later launch keeps the first backup.
func (a *app) applyLaunch(ag agent, files []agentFile) (written []string, err error) {
	rec, _, err := a.readLaunchRecord(ag)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, f := range rec.Files {
		known[f.Path] = true
	}
	for _, f := range files {
		if known[f.Path] {
			continue
		}
		lf := launchedFile{Path: f.Path}
		st, err := os.Stat(f.Path)
		switch {
		case err == nil:
			lf.Backup = f.Path + backupSuffix
			if err := copyMode(f.Path, lf.Backup, st.Mode().Perm()); err != nil {
				return nil, fmt.Errorf("back up %s: %w", f.Path, err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		rec.Files = append(rec.Files, lf)
	}
	if err := a.writeLaunchRecord(ag, rec); err != nil {
		return nil, err
	}
	for _, f := range files {
		old, err := readOptional(f.Path)
		if err != nil {
			return written, err
		}
		data, err := f.contents(old)
		if err != nil {
			return written, fmt.Errorf("%s: %w", f.Path, err)
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return written, err
		}
		mode := fs.FileMode(0o600)
		if st, err := os.Stat(f.Path); err == nil {
			mode = st.Mode().Perm()
		}
		if err := os.WriteFile(f.Path, data, mode); err != nil {
			return written, err
		}
		written = append(written, f.Path)
	}
	return written, nil
}

// undoLaunch puts back what the launches of ag changed: each backed-up file
// is renamed over the file (so its bytes and mode are as they were), each
// file launch created is removed, and the record goes.
func (a *app) undoLaunch(ag agent) error {
	rec, ok, err := a.readLaunchRecord(ag)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nothing to undo: modeld launch %s wrote no settings (no %s)", ag.name, a.launchRecordPath(ag))
	}
	var errs []error
	for _, f := range slices.Backward(rec.Files) {
		if f.Backup != "" {
			if err := os.Rename(f.Backup, f.Path); err != nil {
				errs = append(errs, fmt.Errorf("restore %s: %w", f.Path, err))
				continue
			}
			fmt.Fprintf(a.stdout, "restored %s\n", f.Path)
			continue
		}
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(a.stdout, "removed %s\n", f.Path)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(a.launchRecordPath(ag))
}

func copyMode(src, dst string, mode fs.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellWords(argv []string) []string {
	out := make([]string, len(argv))
	for i, w := range argv {
		out[i] = shellQuote(w)
	}
	return out
}
