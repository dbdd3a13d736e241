package pipelines

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/pipelines/tokenizer"
)

// Options choose how a pipeline runs. The caller decides UseGPU (from the per-task
// GPU allowlist and the probe); a CUDA session that cannot be made falls back to
// CPU and the pipeline reports why.
type Options struct {
	Runtime    *onnx.Runtime // required: from onnx.Init
	UseGPU     bool          // try the CUDA execution provider
	CUDADevice int
	// GPUName is that GPU's name in modeld's output ("cuda:0"), which
	// Device reports while the pipeline runs there (see onnx.SessionOptions).
	GPUName string
	Threads int // ONNX Runtime intra-op threads; 0 = ONNX Runtime's default
	// BatchTokens bounds the padded tokens of one merged forward pass (default 16384).
	BatchTokens int
	// BatchWait is how long an idle pipeline holds a request for others to join
	// (default 2ms; negative = no wait).
	BatchWait time.Duration
	// Lanes is how many session runs of a merged batch a CPU encoder model
	// (embed, classify, rerank) makes at once, each with Threads/Lanes threads,
	// from a second session of the model: on a few cores, parallel single-thread
	// runs outpace one run on all of them. 0 = auto (the threads, at most 4, for
	// a model of up to 512 MiB; else off); 1 = off, which saves that session's
	// copy of the weights.
	Lanes int
	// OnPass, when set, is told about every merged forward pass of an encoder
	// pipeline (embed, classify, rerank), from the pipeline's batching loop.
	OnPass func(PassStats)
	Logger *slog.Logger

	// batchHooks are the encoder batcher's test seams (see batcherHooks).
	batchHooks batcherHooks
}

// Defaults for Options.
const (
	DefaultBatchTokens = 16384
	DefaultBatchWait   = 2 * time.Millisecond
)

func (o Options) batcherConfig() BatcherConfig {
	c := BatcherConfig{TokenBudget: o.BatchTokens, Wait: o.BatchWait, QueueLimit: MaxInFlight}
	if c.TokenBudget <= 0 {
		c.TokenBudget = DefaultBatchTokens
	}
	if c.Wait == 0 {
		c.Wait = DefaultBatchWait
	}
	if c.Wait < 0 {
		c.Wait = 0
	}
	return c
}

// LaneSplit is the lanes an encoder model of modelBytes on the CPU runs with
// Options.Threads and Options.Lanes set to threads and lanes, and the threads
// of each; lanes < 2 means none, and the model holds one session instead of
// two. Automatic lanes are for models up to autoLanesMaxBytes.
func LaneSplit(threads, lanes int, modelBytes int64) (int, int) {
	t := threads
	if t <= 0 {
		t = runtime.NumCPU()
	}
	if lanes == 0 {
		lanes = min(t, maxAutoLanes)
		if modelBytes > autoLanesMaxBytes {
			lanes = 1
		}
	}
	lanes = min(lanes, t)
	if lanes < 2 {
		return 1, t
	}
	return lanes, t / lanes
}

// autoLanesMaxBytes is the largest model that gets lanes by default: the
// matrices of a larger one keep all the threads of one run busy, and a second
// copy of its weights costs more memory.
const autoLanesMaxBytes = 512 << 20

// maxAutoLanes caps the automatic lanes: past a few, the runs' weight traffic
// competes for memory bandwidth and each run's threads do better together.
const maxAutoLanes = 4

// laneSession opens the session the lanes of an encoder model share.
func (o Options) laneSession(path string, threads int) (*onnx.Session, error) {
	return o.Runtime.NewSession(path, onnx.SessionOptions{Threads: threads, Logger: o.Logger})
}

func (o Options) session(path string, outputs ...string) (*onnx.Session, error) {
	if o.Runtime == nil {
		return nil, errors.New("pipelines: Options.Runtime is nil (call onnx.Init first)")
	}
	return o.Runtime.NewSession(path, onnx.SessionOptions{
		Threads: o.Threads, UseCUDA: o.UseGPU, CUDADevice: o.CUDADevice, GPUName: o.GPUName, Outputs: outputs, Logger: o.Logger,
	})
}

// modelConfig is the part of config.json the pipelines read.
type modelConfig struct {
	ModelType             string            `json:"model_type"`
	Architectures         []string          `json:"architectures"`
	ID2Label              map[string]string `json:"id2label"`
	Label2ID              map[string]int    `json:"label2id"`
	ProblemType           string            `json:"problem_type"`
	IsEncoderDecoder      bool              `json:"is_encoder_decoder"`
	MaxPositionEmbeddings int               `json:"max_position_embeddings"`
	DModel                int               `json:"d_model"`
	DecoderLayers         int               `json:"decoder_layers"`
	DecoderAttentionHeads int               `json:"decoder_attention_heads"`
	NumHeads              int               `json:"num_heads"` // T5
	DKV                   int               `json:"d_kv"`      // T5
	NumDecoderLayers      int               `json:"num_decoder_layers"`
}

// MaxConfigBytes bounds a model's config.json: real ones are a few KB (up
// to ~100 KB with a large id2label); the file is untrusted input. Its
// nesting is bounded by encoding/json (10000 levels).
const MaxConfigBytes = 16 << 20

// readConfig reads dir/config.json.
func readConfig(dir string) (modelConfig, error) {
	var c modelConfig
	path := filepath.Join(dir, "config.json")
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("pipelines: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return c, fmt.Errorf("pipelines: %w", err)
	}
	if len(b) > MaxConfigBytes {
		return c, fmt.Errorf("pipelines: %s is more than %d bytes, too large for a model config", path, MaxConfigBytes)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("pipelines: %s/config.json: %w", dir, err)
	}
	return c, nil
}

// labels returns n label names by output index: id2label, else "LABEL_i".
func (c modelConfig) labels(n int) []string {
	out := make([]string, n)
	for i := range out {
		if l, ok := c.ID2Label[strconv.Itoa(i)]; ok {
			out[i] = l
		} else {
			out[i] = "LABEL_" + strconv.Itoa(i)
		}
	}
	return out
}

// modelFiles are the loaded pieces every pipeline shares.
type modelFiles struct {
	dir    string
	config modelConfig
	tok    *tokenizer.Tokenizer
	size   int64
}

func loadFiles(dir string) (*modelFiles, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("pipelines: model folder: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("pipelines: %s is not a model folder", dir)
	}
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	size, err := dirSize(dir)
	if err != nil {
		return nil, err
	}
	return &modelFiles{dir: dir, config: cfg, tok: tok, size: size}, nil
}

// onnxPath is dir/onnx/name, or an ErrWrongModel naming the task when absent.
func (m *modelFiles) onnxPath(name, task string) (string, error) {
	p := filepath.Join(m.dir, "onnx", name)
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("pipelines: %s has no onnx/%s, so it is not a %s model: %w", m.dir, name, task, ErrWrongModel)
		}
		return "", fmt.Errorf("pipelines: %w", err)
	}
	return p, nil
}

// maxTokens is the truncation length: tokenizer_config's model_max_length, capped
// by the model's position table.
func (m *modelFiles) maxTokens() int {
	n := m.tok.MaxLength()
	if p := m.config.MaxPositionEmbeddings; p > 0 && (n == 0 || p < n) {
		n = p
	}
	return n
}

// dirSize is the total size of the files under dir (links followed).
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := os.Stat(path) // follows links into a blob store
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pipelines: size of %s: %w", dir, err)
	}
	return total, nil
}
