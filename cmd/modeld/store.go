package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/backends/llama/promptcache"
	"github.com/modeld/modeld/backends/llama/wire"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

func init() {
	extraCommands = append(extraCommands,
		newPullCommand, newImportCommand, newListCommand, newShowCommand,
		newDUCommand, newRemoveCommand, newPruneCommand, newVerifyCommand)
}

// storeRoot is the model store's directory: $MODELD_HOME/models.
func storeRoot(cfg Config) string { return filepath.Join(cfg.Home, "models") }

// openStore opens the model store of the configuration.
func (a *app) openStore() (*models.Store, error) {
	return models.Open(storeRoot(a.cfg), models.Options{Logger: a.log})
}

// newPuller returns a Puller configured from MODELD_HF_ENDPOINT, HF_TOKEN,
// MODELD_OFFLINE, MODELD_ALLOW_PRIVATE_PULL and MODELD_MAX_DOWNLOAD (through Config).
func (a *app) newPuller(st *models.Store) (*hub.Puller, error) {
	return hub.NewPuller(st, hub.PullConfig{
		Endpoint: a.cfg.HFEndpoint, Token: a.cfg.HFToken, Offline: a.cfg.Offline,
		AllowPrivate: a.cfg.AllowPrivatePull, MaxDownload: a.cfg.MaxDownload,
	})
}

// interruptible returns a context cancelled by Ctrl-C or SIGTERM.
func interruptible(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func newPullCommand(a *app) *cobra.Command {
	var opts hub.PullOptions
	var task string
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Download a model into the store (resumable, sha256-verified)",
		Long: `Download a model into the store. REF is one of:

  hf:owner/repo          an ONNX model repository (files its task needs;
                         onnx/model.onnx, or onnx/model_<variant>.onnx with --variant)
  hf:owner/repo:Q4_K_M   the GGUF file of that quantization in a repository;
                         without a tag the first present of
                         ` + strings.Join(models.DefaultQuantOrder(), ", ") + `
  https://host/.../x.gguf a GGUF file

An interrupted pull continues where it stopped when run again. Every file is
checked against the hub's sha256 before it enters the store. The hub is
--hf-endpoint (MODELD_HF_ENDPOINT); HF_TOKEN, when set, is sent to it (never to
the CDN it redirects to). --offline (MODELD_OFFLINE) refuses to pull.

A pull connects only to public addresses: loopback, link-local, private,
shared (CGNAT) and multicast addresses are refused, whatever name resolves to
them and wherever a redirect points, unless --allow-private-pull (the hub
endpoint itself is always allowed). Redirects from https to http are refused.
A file larger than --max-download, or than the free disk space, is refused
before it is fetched; one of unknown size stops at that bound.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Task = models.Task(task)
			st, err := a.openStore()
			if err != nil {
				return err
			}
			pl, err := a.newPuller(st)
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			pp := newProgressPrinter(a.stdout)
			m, err := pl.Pull(ctx, args[0], opts, pp.event)
			pp.finishBar()
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("pull interrupted; run the same command again to continue where it stopped")
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "pulled %s (%s, %s, %s)\n", m.ID, m.Format, taskList(m.Tasks), humanBytes(m.Size()))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Name, "name", "", "model id to create (default: derived from REF)")
	f.StringVar(&task, "task", "", "task instead of the inferred one: chat, embed, classify, zero-shot-classify, rerank, summarize")
	f.StringVar(&opts.Variant, "variant", "", "ONNX weights variant: quantized, fp16, q4, … (onnx/model_<variant>.onnx)")
	f.StringVar(&opts.Revision, "revision", "", "hub branch, tag or commit (default main)")
	return cmd
}

func newImportCommand(a *app) *cobra.Command {
	var opts models.ImportOptions
	var task string
	cmd := &cobra.Command{
		Use:   "import PATH --name ID",
		Short: "Copy a local .gguf file or ONNX model folder into the store",
		Long: `Copy a local model into the store, without network access. PATH is a .gguf
file (its header and metadata must parse) or a Hugging Face-style ONNX folder:
config.json, tokenizer.json, tokenizer_config.json, onnx/model.onnx (or
onnx/model_<variant>.onnx, or encoder_model + decoder_model_merged for
summarization), and optionally generation_config.json, special_tokens_map.json,
modules.json, 1_Pooling/config.json. The task is inferred from the files unless
--task is given. A corrupt or incomplete model is refused and nothing is added.

--quantize TYPE stores a copy of a GGUF model quantized by llama.cpp's own
quantizer (in a child process) instead of the file itself: ` + quantTypeList() + `.
The input must be F32, F16 or BF16; rows whose length is not a multiple of the
type's block (32, or 256 for the K types) are kept in a type that fits them.
The copy is made in the store's partials and added only when it finished and
reads as a valid model: a failure or Ctrl-C leaves nothing behind.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Name == "" {
				return errors.New("--name is required (a model id such as local/my-model)")
			}
			opts.Task = models.Task(task)
			if opts.Quantize != "" {
				t, err := wire.ParseQuantType(opts.Quantize)
				if err != nil {
					return fmt.Errorf("--quantize: %w", err)
				}
				opts.Quantize = t.Name
				if opts.Quantizer, err = a.quantizer(); err != nil {
					return err
				}
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			pp := newProgressPrinter(a.stdout)
			m, err := st.Import(ctx, args[0], opts, pp.event)
			pp.finishBar()
			if errors.Is(err, models.ErrExists) && !opts.Replace {
				return fmt.Errorf("%w\nto replace it: modeld import %s --name %s --replace", err, args[0], opts.Name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "imported %s (%s, %s, %s)\n", m.ID, m.Format, taskList(m.Tasks), humanBytes(m.Size()))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Name, "name", "", "model id to create (required)")
	f.StringVar(&task, "task", "", "task instead of the inferred one: chat, embed, classify, zero-shot-classify, rerank, summarize")
	f.StringVar(&opts.Variant, "variant", "", "ONNX weights variant to take (onnx/model_<variant>.onnx)")
	f.BoolVar(&opts.Replace, "replace", false, "replace a model with the same id")
	f.StringVar(&opts.Projector, "mmproj", "", "a GGUF chat model's multimodal projector (mmproj .gguf), kept with the model")
	f.StringVar(&opts.Quantize, "quantize", "", "store a GGUF model quantized to this type: "+quantTypeList())
	return cmd
}

func quantTypeList() string { return strings.Join(wire.QuantTypes(), ", ") }

// listEntry is one model of `modeld ls --json`.
type listEntry struct {
	ID           string        `json:"id"`
	Tasks        []models.Task `json:"tasks"`
	Format       models.Format `json:"format"`
	Quantization string        `json:"quantization,omitempty"`
	SizeBytes    int64         `json:"size_bytes"`
	Modified     time.Time     `json:"modified"`
	Broken       string        `json:"broken,omitempty"`  // why the model cannot be used (Manifest.Broken)
	Aliases      []string      `json:"aliases,omitempty"` // --model-aliases patterns naming it
}

func newListCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the models in the store",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			ms, err := st.List()
			if err != nil {
				return err
			}
			warnUnreadable(a.stderr, st)
			for _, m := range ms {
				if why := m.Broken(); why != "" {
					fmt.Fprintf(a.stderr, "warning: %s is broken: %s\n", m.ID, why)
				}
			}
			if asJSON {
				out := make([]listEntry, 0, len(ms))
				for _, m := range ms {
					out = append(out, listEntry{m.ID, m.Tasks, m.Format, m.Quantization(), m.Size(), m.Modified, m.Broken(), a.cfg.Aliases.of(m.ID)})
				}
				return writeJSON(a.stdout, out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTASK\tFORMAT\tQUANT\tSIZE\tMODIFIED")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, taskList(m.Tasks), m.Format, orDash(m.Quantization()),
					humanBytes(m.Size()), m.Modified.Local().Format("2006-01-02 15:04"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printAliases(a.stdout, a.cfg.Aliases)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printAliases lists the model aliases under ls's table, in the order they
// are tried.
func printAliases(w io.Writer, as modelAliases) {
	if len(as) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALIAS\tMODEL")
	for _, al := range as {
		fmt.Fprintf(tw, "%s\t%s\n", al.Pattern, al.Target)
	}
	tw.Flush()
}

func newShowCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a model's files, digests and metadata",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			m, err := st.Get(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, m)
			}
			printManifest(a.stdout, m)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the manifest as JSON")
	return cmd
}

func printManifest(w io.Writer, m *models.Manifest) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("id", m.ID)
	row("format", string(m.Format))
	row("tasks", taskList(m.Tasks))
	row("size", humanBytes(m.Size()))
	row("source", sourceText(m.Source))
	row("created", m.Created.Local().Format(time.RFC3339))
	row("modified", m.Modified.Local().Format(time.RFC3339))
	if g := m.GGUF; g != nil {
		row("name", g.Name)
		row("architecture", g.Architecture)
		row("parameters", humanCount(g.Parameters))
		if g.ContextLength > 0 {
			row("context length", fmt.Sprint(g.ContextLength))
		}
		row("quantization", g.FileType)
		row("chat template", yesNo(g.ChatTemplate))
		row("tokenizer", g.Tokenizer)
	}
	if o := m.ONNX; o != nil {
		row("architectures", strings.Join(o.Architectures, ", "))
		row("model type", o.ModelType)
		row("dtype", o.DType)
		if o.MaxLength > 0 {
			row("context length", fmt.Sprint(o.MaxLength))
		}
		row("labels", strings.Join(o.Labels, ", "))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "FILE\tSIZE\tDIGEST")
	for _, f := range m.Files {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Path, humanBytes(f.Size), f.Digest)
	}
	_ = tw.Flush() // writes to the command's output
}

func sourceText(s models.Source) string {
	switch s.Kind {
	case models.SourceImport:
		return "imported from " + s.Path
	case models.SourceHub:
		t := s.Ref + " at " + s.Commit
		if s.Endpoint != "" && s.Endpoint != hub.DefaultEndpoint {
			t += " (" + s.Endpoint + ")"
		}
		return t
	case models.SourceURL:
		return s.URL
	}
	return string(s.Kind)
}

func newDUCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "du",
		Short: "Show the store's disk usage: per model, shared, partial and orphaned",
		Long: `Show the disk usage of the store. UNIQUE is what removing a model frees; SHARED
is held together with the models listed. The total is every byte under the
store directory; partial downloads, orphaned blobs and leftovers are listed
apart (modeld prune removes those not in use).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			u, err := st.DiskUsage()
			if err != nil {
				return err
			}
			pc, err := promptcache.DiskUsage(a.promptCacheDir())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, duReport{Usage: u, PromptCache: pc})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tUNIQUE\tSHARED\tSHARED WITH")
			for _, m := range u.Models {
				with := strings.Join(m.SharedWith, ", ")
				if len(m.Missing) > 0 {
					with += " (missing blobs: " + strings.Join(m.Missing, ", ") + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ID, humanBytes(m.Unique), humanBytes(m.Shared), orDash(with))
			}
			fmt.Fprintln(tw)
			fmt.Fprintf(tw, "models\t%s\t(blobs in use, each counted once)\n", humanBytes(u.Blobs))
			fmt.Fprintf(tw, "manifests\t%s\t\n", humanBytes(u.Manifests))
			for _, part := range []struct {
				name, hint string
				entries    []models.Entry
			}{
				{"partials", "interrupted or running pulls", u.Partials},
				{"orphans", "blobs no model uses; modeld prune removes them", u.Orphans},
				{"other", "leftovers and lock files", u.Other},
			} {
				fmt.Fprintf(tw, "%s\t%s\t(%d files: %s)\n", part.name, humanBytes(models.Sum(part.entries)), len(part.entries), part.hint)
				for _, e := range part.entries {
					fmt.Fprintf(tw, "  %s\t%s\t\n", e.Path, humanBytes(e.Size))
				}
			}
			fmt.Fprintf(tw, "total\t%s\t(%s)\n", humanBytes(u.Total), st.Root())
			writePromptCacheUsage(tw, pc)
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newPruneCommand(a *app) *cobra.Command {
	var asJSON, promptCache bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove orphaned blobs, stale partial downloads and crash leftovers",
		Long: `Remove orphaned blobs, stale partial downloads and crash leftovers from the store.
With --cache, empty the on-disk prompt cache instead (the KV of prompt prefixes
kept in the home's kvcache/); the next prompt of each conversation is then
evaluated in full again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if promptCache {
				return a.prunePromptCache(asJSON)
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			rep, err := st.Prune(ctx)
			if rep != nil && asJSON {
				if jerr := writeJSON(a.stdout, rep); jerr != nil {
					return errors.Join(err, jerr)
				}
				return err
			}
			if rep != nil {
				for _, e := range rep.Removed {
					fmt.Fprintf(a.stdout, "removed %s (%s)\n", e.Path, humanBytes(e.Size))
				}
				fmt.Fprintf(a.stdout, "freed %s\n", humanBytes(rep.Freed))
				if rep.OrphansKept {
					fmt.Fprintln(a.stdout, "orphaned blobs kept: a pull or import is running; prune again after it ends")
				}
				if rep.PartialsInUse > 0 {
					fmt.Fprintf(a.stdout, "%d partial downloads kept: in use by a running pull\n", rep.PartialsInUse)
				}
				for _, id := range rep.CorruptManifests {
					fmt.Fprintf(a.stdout, "removed the corrupt manifest of %s\n", id)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&promptCache, "cache", false, "empty the on-disk prompt cache instead of pruning the store")
	return cmd
}

// warnUnreadable tells the user about manifests the listing leaves out.
func warnUnreadable(w io.Writer, st *models.Store) {
	un, err := st.Unreadable()
	if err != nil {
		return // the listing itself reported what it could read
	}
	for _, u := range un {
		if u.Corrupt {
			fmt.Fprintf(w, "warning: the manifest of %s is corrupt (%s); `modeld rm %s` or `modeld prune` removes it\n", u.ID, u.Error, u.ID)
		} else {
			fmt.Fprintf(w, "warning: %s left out: %s\n", u.ID, u.Error)
		}
	}
}

func newVerifyCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [ID]",
		Short: "Hash the files of a model, or of every model, again and report each as ok, corrupt or missing",
		Long: `Hash every file of the model ID (or of every model in the store) again and
compare it with the sha256 digest in its manifest. Each file is reported as ok,
CORRUPT (with the digest its bytes have) or MISSING; manifests that cannot be
read are reported too. The command exits non-zero when anything does not
match. The daemon refuses to load a file found corrupt; pull or import the model
again to repair it, or remove it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			rep, err := st.Verify(ctx, id)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(a.stdout, rep); err != nil {
					return err
				}
			} else {
				printVerify(a.stdout, rep)
			}
			bad := 0
			for _, c := range rep.Checks {
				if c.Status != models.CheckOK {
					bad++
				}
			}
			if bad > 0 {
				return fmt.Errorf("verify: %d of %d checks failed; pull or import those models again, or remove them", bad, len(rep.Checks))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printVerify(w io.Writer, rep *models.VerifyReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tMODEL\tFILE\tDIGEST\tFOUND")
	for _, c := range rep.Checks {
		found := "-"
		switch c.Status {
		case models.CheckCorrupt:
			found = fmt.Sprintf("%s (%s)", orDash(c.Got), humanBytes(c.GotSize))
		case models.CheckMissing:
			found = "no blob file"
		}
		if c.Error != "" {
			found = c.Error
		}
		status := c.Status
		if status != models.CheckOK {
			status = strings.ToUpper(status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", status, c.Model, orDash(c.Path), orDash(c.Digest), found)
	}
	_ = tw.Flush() // writes to the command's output
	fmt.Fprintf(w, "%d checks, %s hashed\n", len(rep.Checks), humanBytes(rep.Bytes))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// humanCount prints 1234567 as 1.2M.
func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
