package gatewaytest

import (
	"context"
	"fmt"
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extProcPb "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"sigs.k8s.io/gateway-api-inference-extension/apix/v1alpha2"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/handlers"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/metadata"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/requestcontrol"
)

// hostStore is the picker's datastore over the Picker's hosts: the one
// pool, no objectives or rewrites (those come from Kubernetes objects).
type hostStore struct{ p *Picker }

func (s hostStore) PoolGet() (*datalayer.EndpointPool, error) {
	return datalayer.NewEndpointPool("modeld", "modeld"), nil
}

func (s hostStore) ObjectiveGet(string) *v1alpha2.InferenceObjective { return nil }

func (s hostStore) ModelRewriteGet(string) (*v1alpha2.InferenceModelRewriteRule, string) {
	return nil, ""
}

func (s hostStore) PodList(keep func(fwkdl.Endpoint) bool) []fwkdl.Endpoint {
	var out []fwkdl.Endpoint
	for _, h := range s.p.hosts {
		if keep == nil || keep(h.ep) {
			out = append(out, h.ep)
		}
	}
	return out
}

// serveExtProc runs the picker's ext_proc server — its director, with the
// loader's scheduler, parser, saturation detector and request-control
// plugins — on a local gRPC port, and returns a client of it.
func serveExtProc(t *testing.T, p *Picker) extProcPb.ExternalProcessorClient {
	t.Helper()
	ds := hostStore{p}
	candidates := requestcontrol.NewDatastoreEndpointCandidates(ds)
	rc := requestcontrol.NewConfig()
	rc.AddPlugins(p.handle.GetAllPlugins()...)
	director := requestcontrol.NewDirectorWithConfig(ds, p.scheduler,
		requestcontrol.NewLegacyAdmissionController(p.cfg.SaturationDetector, candidates),
		p.cfg.ParserConfig.Parser, candidates, rc)
	srv := grpc.NewServer()
	extProcPb.RegisterExternalProcessorServer(srv, handlers.NewStreamingServer(ds, director, p.cfg.ParserConfig.Parser))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return extProcPb.NewExternalProcessorClient(conn)
}

// route sends one request through ext_proc as Envoy does — the headers,
// then the body — and returns the destination the picker set.
func route(t *testing.T, c extProcPb.ExternalProcessorClient, path, body string) string {
	t.Helper()
	got, ok := tryRoute(t, c, path, body)
	if !ok {
		t.Fatalf("ext_proc refused %s: %s", path, got)
	}
	return got
}

// tryRoute is route that reports a refusal (an immediate response: its
// status and body) instead of failing.
func tryRoute(t *testing.T, c extProcPb.ExternalProcessorClient, path, body string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := c.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	if err := stream.Send(&extProcPb.ProcessingRequest{Request: &extProcPb.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extProcPb.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			hdr(":method", "POST"), hdr(":path", path), hdr(":authority", "llm.example.com"),
			hdr("content-type", "application/json"), hdr("content-length", fmt.Sprint(len(body))),
		}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&extProcPb.ProcessingRequest{Request: &extProcPb.ProcessingRequest_RequestBody{
		RequestBody: &extProcPb.HttpBody{Body: []byte(body), EndOfStream: true},
	}}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		res, err := stream.Recv()
		if err != nil {
			t.Fatalf("ext_proc: %v", err)
		}
		if imm := res.GetImmediateResponse(); imm != nil {
			return fmt.Sprintf("%v %s", imm.GetStatus().GetCode(), imm.GetBody()), false
		}
		var muts []*corev3.HeaderValueOption
		if h := res.GetRequestHeaders(); h != nil {
			muts = h.GetResponse().GetHeaderMutation().GetSetHeaders()
		}
		if b := res.GetRequestBody(); b != nil {
			muts = append(muts, b.GetResponse().GetHeaderMutation().GetSetHeaders()...)
		}
		for _, m := range muts {
			if m.GetHeader().GetKey() == metadata.DestinationEndpointKey {
				return string(m.GetHeader().GetRawValue()), true
			}
		}
	}
	t.Fatal("ext_proc set no destination")
	return "", false
}

// TestExtProc: the path a gateway takes. Through the picker's ext_proc
// server over gRPC, a model loaded on one host only goes to that host; the
// OpenAI parser refuses Ollama's /api/chat, which the passthrough parser of
// the Ollama routes' picker lets through (scored on load alone: it reads no
// model name).
func TestExtProc(t *testing.T) {
	a, b := startHost(t, "a", []string{"t/chat", "t/coder"}), startHost(t, "b", []string{"t/chat"})
	chat(t, a, "t/coder")
	chat(t, b, "t/chat")
	p := newPicker(t, a, b)
	refreshUntil(t, p, "the loaded models", func(errs map[string]error) bool {
		_, coder := p.Host("a").Metrics().ActiveModels["t/coder"]
		return ready(errs) && coder
	})
	c := serveExtProc(t, p)
	for i := range 10 {
		body := fmt.Sprintf(`{"model":"t/coder","messages":[{"role":"user","content":"question %d"}]}`, i)
		if got := route(t, c, "/v1/chat/completions", body); got != a.addr {
			t.Errorf("t/coder request %d went to %s, want a (%s)", i, got, a.addr)
		}
	}
	ollama := `{"model":"t/chat","messages":[{"role":"user","content":"hi"}]}`
	if got, ok := tryRoute(t, c, "/api/chat", ollama); ok {
		t.Errorf("the OpenAI parser routed an Ollama /api/chat request (to %s); the Ollama routes need their own picker", got)
	}
	po, err := NewPicker(t.Context(), OllamaConfig(ModeldConfig), map[string]string{"a": a.addr, "b": b.addr})
	if err != nil {
		t.Fatal(err)
	}
	po.Refresh(t.Context())
	co := serveExtProc(t, po)
	if got, ok := tryRoute(t, co, "/api/chat", ollama); !ok || (got != a.addr && got != b.addr) {
		t.Errorf("the passthrough parser's picker sent an Ollama /api/chat request to %q (routed %v), want a host", got, ok)
	}
}
