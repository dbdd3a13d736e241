package onnx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/modeld/modeld/probe"
)

// Devices a session reports.
const (
	DeviceCPU = probe.DeviceCPU
)

// cudaDevice names the CUDA device a session runs on: name when it is
// given, else CUDA device n.
func cudaDevice(name string, n int) string {
	if name != "" {
		return name
	}
	return probe.DeviceName(probe.CUDA, n)
}

// SessionOptions choose how a model runs.
type SessionOptions struct {
	// Threads is ORT's intra-op thread count; 0 leaves ORT's default (one per core).
	Threads int
	// UseCUDA asks for the CUDA execution provider. When the provider cannot be
	// appended or the session cannot be created with it, the session is created on
	// CPU with the same settings and FallbackReason says why.
	UseCUDA bool
	// CUDADevice is the CUDA device id used when UseCUDA is set.
	CUDADevice int
	// GPUName is that device's name in modeld's output (probe.GPU.ID, e.g.
	// "cuda:0"), which Device reports; "" names it cuda:<CUDADevice>.
	GPUName string
	// Outputs restricts the outputs Run computes and returns (nil: all of them).
	Outputs []string
	// Logger receives the CPU-fallback warning; nil uses slog.Default().
	Logger *slog.Logger
}

// TensorInfo describes one model input or output as the model declares it.
type TensorInfo struct {
	Name  string
	Type  DType
	Shape []int64 // -1 for a dynamic dimension
}

// Session is one loaded model. Run may be called from several goroutines at once;
// Close waits for running calls to return.
type Session struct {
	mu       sync.RWMutex // held shared by Run, exclusively by Close
	path     string
	inputs   []TensorInfo
	outputs  []TensorInfo // the outputs Run returns, in order
	sess     *ort.DynamicAdvancedSession
	device   string
	fallback string
}

// NewSession loads the model at path (a Runtime proves that Init ran): its inputs
// and outputs as the model declares them, run with dynamic shapes.
func (r *Runtime) NewSession(path string, opts SessionOptions) (*Session, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("onnx: model file: %w", err)
	}
	inputs, outputs, err := readIO(path)
	if err != nil {
		return nil, err
	}
	outputs, err = selectOutputs(outputs, opts.Outputs)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", path, err)
	}
	s := &Session{path: path, inputs: inputs, outputs: outputs, device: DeviceCPU}
	inNames, outNames := names(inputs), names(outputs)

	if opts.UseCUDA {
		sess, err := createSession(path, inNames, outNames, opts.Threads, &opts.CUDADevice)
		if err == nil {
			s.sess, s.device = sess, cudaDevice(opts.GPUName, opts.CUDADevice)
			return s, nil
		}
		s.fallback = err.Error()
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("onnx: CUDA unavailable, running on CPU", "model", path, "reason", s.fallback)
	}
	sess, err := createSession(path, inNames, outNames, opts.Threads, nil)
	if err != nil {
		return nil, fmt.Errorf("onnx: create session for %s: %w", path, err)
	}
	s.sess = sess
	return s, nil
}

// createSession makes a session with fresh options; cuda != nil appends the CUDA
// execution provider for that device first.
func createSession(path string, in, out []string, threads int, cuda *int) (_ *ort.DynamicAdvancedSession, err error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer func() {
		if derr := so.Destroy(); derr != nil && err == nil {
			err = fmt.Errorf("release session options: %w", derr)
		}
	}()
	if threads > 0 {
		if err := so.SetIntraOpNumThreads(threads); err != nil {
			return nil, fmt.Errorf("set intra-op threads: %w", err)
		}
	}
	if cuda != nil {
		if err := appendCUDA(so, *cuda); err != nil {
			return nil, fmt.Errorf("CUDA execution provider: %w", err)
		}
	}
	sess, err := ort.NewDynamicAdvancedSession(path, in, out, so)
	if err != nil {
		if cuda != nil {
			return nil, fmt.Errorf("session with CUDA execution provider: %w", err)
		}
		return nil, err
	}
	return sess, nil
}

func appendCUDA(so *ort.SessionOptions, device int) (err error) {
	co, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return err
	}
	defer func() {
		if derr := co.Destroy(); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := co.Update(map[string]string{"device_id": strconv.Itoa(device)}); err != nil {
		return err
	}
	return so.AppendExecutionProviderCUDA(co)
}

// readIO reads the model's declared inputs and outputs through a throwaway CPU
// session without graph optimizations (cheap; it also validates the file).
func readIO(path string) (_, _ []TensorInfo, err error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer func() {
		if derr := so.Destroy(); derr != nil && err == nil {
			err = fmt.Errorf("onnx: release session options: %w", derr)
		}
	}()
	if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, nil, fmt.Errorf("onnx: session options: %w", err)
	}
	if err := so.SetIntraOpNumThreads(1); err != nil {
		return nil, nil, fmt.Errorf("onnx: session options: %w", err)
	}
	in, out, err := ort.GetInputOutputInfoWithOptions(path, so)
	if err != nil {
		return nil, nil, fmt.Errorf("onnx: %s is not a loadable ONNX model: %w", path, err)
	}
	conv := func(infos []ort.InputOutputInfo) ([]TensorInfo, error) {
		ts := make([]TensorInfo, len(infos))
		for i, x := range infos {
			if x.OrtValueType != ort.ONNXTypeTensor {
				return nil, fmt.Errorf("onnx: %s: %q is a %s, only tensors are supported", path, x.Name, x.OrtValueType)
			}
			ts[i] = TensorInfo{Name: x.Name, Type: dtypeOf(x.DataType), Shape: append([]int64(nil), x.Dimensions...)}
		}
		return ts, nil
	}
	ins, err := conv(in)
	if err != nil {
		return nil, nil, err
	}
	outs, err := conv(out)
	if err != nil {
		return nil, nil, err
	}
	return ins, outs, nil
}

func selectOutputs(all []TensorInfo, want []string) ([]TensorInfo, error) {
	if len(want) == 0 {
		return all, nil
	}
	sel := make([]TensorInfo, 0, len(want))
	for _, w := range want {
		i := indexOf(all, w)
		if i < 0 {
			return nil, fmt.Errorf("model has no output %q (it has %v)", w, names(all))
		}
		sel = append(sel, all[i])
	}
	return sel, nil
}

func names(ts []TensorInfo) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func indexOf(ts []TensorInfo, name string) int {
	for i, t := range ts {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// Inputs are the model's inputs as it declares them.
func (s *Session) Inputs() []TensorInfo { return s.inputs }

// Outputs are the outputs Run returns, in order.
func (s *Session) Outputs() []TensorInfo { return s.outputs }

// HasInput says whether the model declares an input with this name.
func (s *Session) HasInput(name string) bool { return indexOf(s.inputs, name) >= 0 }

// Input returns the declared input with this name.
func (s *Session) Input(name string) (TensorInfo, bool) {
	i := indexOf(s.inputs, name)
	if i < 0 {
		return TensorInfo{}, false
	}
	return s.inputs[i], true
}

// Path is the model file.
func (s *Session) Path() string { return s.path }

// Device is where the session runs: "cpu" or "cuda:N".
func (s *Session) Device() string { return s.device }

// FallbackReason is why a session asked to use CUDA runs on CPU ("" otherwise).
func (s *Session) FallbackReason() string { return s.fallback }

// Close releases the session, after the running calls have returned.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		return nil
	}
	err := s.sess.Destroy()
	s.sess = nil
	if err != nil {
		return fmt.Errorf("onnx: close %s: %w", s.path, err)
	}
	return nil
}

// ErrClosed is returned by Run on a closed session.
var ErrClosed = errors.New("onnx: session closed")

// Run feeds one tensor per model input (by name) and returns the selected outputs by
// name. Inputs are checked against the model's declared names, types and ranks
// first. A cancelled ctx stops a running forward pass.
func (s *Session) Run(ctx context.Context, inputs map[string]*Tensor) (_ map[string]*Tensor, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.sess == nil {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.check(inputs); err != nil {
		return nil, err
	}
	values := make([]ort.Value, len(s.inputs))
	defer func() {
		for _, v := range values {
			if v != nil {
				if derr := v.Destroy(); derr != nil && err == nil {
					err = fmt.Errorf("onnx: release input: %w", derr)
				}
			}
		}
	}()
	for i, in := range s.inputs {
		v, err := inputs[in.Name].value()
		if err != nil {
			return nil, fmt.Errorf("onnx: input %q: %w", in.Name, err)
		}
		values[i] = v
	}
	outs := make([]ort.Value, len(s.outputs))
	defer func() {
		for _, v := range outs {
			if v != nil {
				if derr := v.Destroy(); derr != nil && err == nil {
					err = fmt.Errorf("onnx: release output: %w", derr)
				}
			}
		}
	}()
	if err := s.run(ctx, values, outs); err != nil {
		return nil, err
	}
	result := make(map[string]*Tensor, len(outs))
	for i, v := range outs {
		t, err := fromValue(v)
		if err != nil {
			return nil, fmt.Errorf("onnx: output %q: %w", s.outputs[i].Name, err)
		}
		result[s.outputs[i].Name] = t
	}
	return result, nil
}

func (s *Session) run(ctx context.Context, in, out []ort.Value) (err error) {
	if ctx.Done() == nil {
		if err := s.sess.Run(in, out); err != nil {
			return fmt.Errorf("onnx: run %s: %w", s.path, err)
		}
		return nil
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		return fmt.Errorf("onnx: run options: %w", err)
	}
	terminated := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(terminated)
		_ = ro.Terminate() // best effort: the run fails soon after, or has already finished
	})
	runErr := s.sess.RunWithOptions(in, out, ro)
	if !stop() {
		<-terminated
	}
	if derr := ro.Destroy(); derr != nil && runErr == nil {
		return fmt.Errorf("onnx: release run options: %w", derr)
	}
	if runErr != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("onnx: run %s: %w", s.path, cerr)
		}
		return fmt.Errorf("onnx: run %s: %w", s.path, runErr)
	}
	return nil
}

// check validates inputs against the declared ones, collecting every problem.
func (s *Session) check(inputs map[string]*Tensor) error {
	var errs []error
	for _, in := range s.inputs {
		t, ok := inputs[in.Name]
		if !ok || t == nil {
			errs = append(errs, fmt.Errorf("missing input %q", in.Name))
			continue
		}
		if t.Type() != in.Type {
			errs = append(errs, fmt.Errorf("input %q is %s, the model wants %s", in.Name, t.Type(), in.Type))
		}
		if len(t.Shape) != len(in.Shape) {
			errs = append(errs, fmt.Errorf("input %q has rank %d, the model wants %d (%v)", in.Name, len(t.Shape), len(in.Shape), in.Shape))
			continue
		}
		for d, want := range in.Shape {
			if want >= 0 && t.Shape[d] != want {
				errs = append(errs, fmt.Errorf("input %q dimension %d is %d, the model wants %d", in.Name, d, t.Shape[d], want))
			}
		}
		if err := t.validate(); err != nil {
			errs = append(errs, fmt.Errorf("input %q: %w", in.Name, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		if indexOf(s.inputs, name) < 0 {
			errs = append(errs, fmt.Errorf("the model has no input %q (it has %v)", name, names(s.inputs)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("onnx: %s: %w", s.path, errors.Join(errs...))
	}
	return nil
}
