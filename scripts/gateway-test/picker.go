// Package gatewaytest runs the Gateway API Inference Extension's own endpoint
// picker code (its config loader, metrics data source and extractor,
// scheduler, scorers and prefix producer, pinned in go.mod) over modeld
// hosts: real daemons in the tests, simulated hosts in the load model. It is
// a module of its own so that the picker's dependencies stay out of modeld's
// go.mod.
//
// It must not reimplement a scorer or the extraction: what it adds is the
// wiring the picker's binary does around them (plugins registered, the
// data layer polled, the prefix producer run before and after a pick).
package gatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	k8stypes "k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/config"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/config/loader"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	fwkplugin "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	fwkrc "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/requestcontrol"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
	attrprefix "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/attribute/prefix"
	extractormetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/extractor/metrics"
	sourcemetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/metrics"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requesthandling/parsers/openai"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requesthandling/parsers/passthrough"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/picker"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/profile"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/kvcacheutilization"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/loraaffinity"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/prefix"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/queuedepth"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/runningrequests"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/scheduling"

	// the flow-control defaults the loader injects
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/fairness"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/ordering"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/usagelimits"
)

var registerOnce sync.Once

// register adds the picker's in-tree plugins that a modeld config uses, as
// its binary does at start.
func register() {
	registerOnce.Do(func() {
		ctrllog.SetLogger(logr.Discard()) // the plugins log through it; unset, it prints a warning with a stack
		for typ, f := range map[string]fwkplugin.FactoryFunc{
			queuedepth.QueueScorerType:                      queuedepth.QueueScorerFactory,
			kvcacheutilization.KvCacheUtilizationScorerType: kvcacheutilization.KvCacheUtilizationScorerFactory,
			runningrequests.RunningRequestsSizeScorerType:   runningrequests.RunningRequestsSizeScorerFactory,
			prefix.PrefixCacheScorerPluginType:              prefix.PrefixCachePluginFactory,
			loraaffinity.LoraAffinityScorerType:             loraaffinity.LoraAffinityScorerFactory,
			approximateprefix.ApproxPrefixCachePluginType:   approximateprefix.ApproxPrefixCacheFactory,
			picker.MaxScorePickerType:                       picker.MaxScorePickerFactory,
			picker.RandomPickerType:                         picker.RandomPickerFactory,
			profile.SingleProfileHandlerType:                profile.SingleProfileHandlerFactory,
			sourcemetrics.MetricsDataSourceType:             sourcemetrics.MetricsDataSourceFactory,
			extractormetrics.MetricsExtractorType:           extractormetrics.CoreMetricsExtractorFactory,
			openai.OpenAIParserType:                         openai.OpenAIParserPluginFactory,
			passthrough.PassthroughParserType:               passthrough.PassthroughParserPluginFactory,
			utilization.UtilizationDetectorType:             utilization.UtilizationDetectorFactory,
			fairness.GlobalStrictFairnessPolicyType:         fairness.GlobalStrictFairnessPolicyFactory,
			fairness.RoundRobinFairnessPolicyType:           fairness.RoundRobinFairnessPolicyFactory,
			ordering.FCFSOrderingPolicyType:                 ordering.FCFSOrderingPolicyFactory,
			usagelimits.StaticUsageLimitPolicyType:          usagelimits.StaticPolicyFactory,
		} {
			fwkplugin.Register(typ, f)
		}
	})
}

// Host is one modeld host as the picker sees it: an endpoint whose metrics
// the data layer fills.
type Host struct {
	Name string
	ep   *fwkdl.ModelServer
}

// Metrics is what the picker last extracted for the host.
func (h *Host) Metrics() *fwkdl.Metrics { return h.ep.GetMetrics() }

// SetMetrics replaces what the picker knows of the host, as an extractor
// would: the load model's simulated hosts are not scraped.
func (h *Host) SetMetrics(m *fwkdl.Metrics) { h.ep.UpdateMetrics(m) }

// Picker is a configured endpoint picker over a fixed set of hosts.
type Picker struct {
	cfg       *config.Config // what the loader built
	handle    fwkplugin.Handle
	scheduler *scheduling.Scheduler
	sources   []sourceWithExtractors
	prepare   []fwkrc.PrepareDataPlugin
	pre       []fwkrc.PreRequest
	hosts     []*Host
	seq       int
}

type sourceWithExtractors struct {
	poll       fwkdl.PollingDataSource
	extractors []fwkdl.Extractor
}

// NewPicker loads config (the picker's EndpointPickerConfig YAML) the way
// its binary does, over hosts given as name → "address:port".
func NewPicker(ctx context.Context, config []byte, hosts map[string]string) (*Picker, error) {
	register()
	raw, _, err := loader.LoadRawConfig(config, logr.Discard())
	if err != nil {
		return nil, fmt.Errorf("picker config: %w", err)
	}
	p := &Picker{}
	var names []k8stypes.NamespacedName
	for name, addr := range hosts {
		ip, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		nn := k8stypes.NamespacedName{Namespace: "modeld", Name: name}
		names = append(names, nn)
		p.hosts = append(p.hosts, &Host{Name: name, ep: fwkdl.NewEndpoint(&fwkdl.EndpointMetadata{
			NamespacedName: nn, PodName: name, Address: ip, Port: port, MetricsHost: addr,
		}, nil)})
	}
	p.handle = fwkplugin.NewEppHandle(ctx, func() []k8stypes.NamespacedName { return names })
	cfg, err := loader.InstantiateAndConfigure(raw, p.handle, logr.Discard())
	if err != nil {
		return nil, fmt.Errorf("picker config: %w", err)
	}
	p.cfg = cfg
	p.scheduler = scheduling.NewSchedulerWithConfig(cfg.SchedulerConfig)
	if cfg.DataConfig != nil {
		for _, s := range cfg.DataConfig.Sources {
			poll, ok := s.Plugin.(fwkdl.PollingDataSource)
			if !ok {
				return nil, fmt.Errorf("data source %s does not poll", s.Plugin.TypedName())
			}
			p.sources = append(p.sources, sourceWithExtractors{poll: poll, extractors: s.Extractors})
		}
	}
	for _, pl := range p.handle.GetAllPlugins() {
		if d, ok := pl.(fwkrc.PrepareDataPlugin); ok {
			p.prepare = append(p.prepare, d)
		}
		if d, ok := pl.(fwkrc.PreRequest); ok {
			p.pre = append(p.pre, d)
		}
	}
	return p, nil
}

// Hosts are the picker's hosts.
func (p *Picker) Hosts() []*Host { return p.hosts }

// Host is the host named name, or nil.
func (p *Picker) Host(name string) *Host {
	for _, h := range p.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Refresh runs one poll of every data source on every host and hands the
// result to the source's extractors, as the data layer's collector does on
// each tick. It returns each host's error (a refused scrape, a missing
// series), nil for a host that was read in full.
func (p *Picker) Refresh(ctx context.Context) map[string]error {
	out := map[string]error{}
	for _, h := range p.hosts {
		var errs []error
		for _, s := range p.sources {
			data, err := s.poll.Poll(ctx, h.ep)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, x := range s.extractors {
				if err := x.Extract(ctx, data, h.ep); err != nil {
					errs = append(errs, err)
				}
			}
		}
		out[h.Name] = errors.Join(errs...)
	}
	return out
}

// Pick schedules one chat request for model with messages, as the picker's
// director does: the prepare-data plugins (the prefix producer) first, the
// scheduler, then the pre-request plugins that record the pick. It returns
// the chosen host.
func (p *Picker) Pick(ctx context.Context, model string, messages ...string) (*Host, error) {
	p.seq++
	msgs := make([]map[string]string, len(messages))
	for i, m := range messages {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = map[string]string{"role": role, "content": m}
	}
	b, err := json.Marshal(map[string]any{"messages": msgs})
	if err != nil {
		return nil, err
	}
	var chat fwksched.ChatCompletionsRequest
	if err := json.Unmarshal(b, &chat); err != nil {
		return nil, err
	}
	req := &fwksched.LLMRequest{
		RequestId:   fmt.Sprintf("req-%d", p.seq),
		TargetModel: model,
		Body:        &fwksched.LLMRequestBody{ChatCompletions: &chat},
		Headers:     map[string]string{},
	}
	candidates := make([]fwksched.Endpoint, len(p.hosts))
	for i, h := range p.hosts {
		candidates[i] = fwksched.NewEndpoint(h.ep.GetMetadata(), h.ep.GetMetrics(), h.ep.GetAttributes())
	}
	for _, d := range p.prepare {
		if err := d.PrepareRequestData(ctx, req, candidates); err != nil {
			return nil, fmt.Errorf("prepare data %s: %w", d.TypedName(), err)
		}
	}
	res, err := p.scheduler.Schedule(ctx, req, candidates)
	if err != nil {
		return nil, err
	}
	for _, d := range p.pre {
		d.PreRequest(ctx, req, res)
	}
	primary := res.ProfileResults[res.PrimaryProfileName]
	if primary == nil || len(primary.TargetEndpoints) == 0 {
		return nil, errors.New("the scheduler picked no endpoint")
	}
	picked := primary.TargetEndpoints[0].GetMetadata().NamespacedName.Name
	h := p.Host(picked)
	if h == nil {
		return nil, fmt.Errorf("the scheduler picked %q, not a host", picked)
	}
	p.settle(ctx, req, h)
	return h, nil
}

// settle waits until the prefix producer has indexed req's prompt on h:
// it does so in a goroutine of its own after the pick, which a real
// picker's next request, milliseconds later, does not overtake, but the
// next Pick here would. It gives up after a bound (the index may have
// evicted part of the prompt already).
func (p *Picker) settle(ctx context.Context, req *fwksched.LLMRequest, h *Host) {
	if len(p.prepare) == 0 {
		return
	}
	probe := *req
	candidates := []fwksched.Endpoint{fwksched.NewEndpoint(h.ep.GetMetadata(), h.ep.GetMetrics(), fwkdl.NewAttributes())}
	for i := range 2000 {
		probe.RequestId = fmt.Sprintf("%s-settle-%d", req.RequestId, i)
		for _, d := range p.prepare {
			_ = d.PrepareRequestData(ctx, &probe, candidates)
		}
		v, ok := candidates[0].Get(attrprefix.PrefixCacheMatchInfoKey)
		info, isInfo := v.(*attrprefix.PrefixCacheMatchInfo)
		if !ok || !isInfo || info.MatchBlocks() >= info.TotalBlocks() {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}
