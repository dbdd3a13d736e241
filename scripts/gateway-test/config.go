package gatewaytest

import _ "embed"

// ModeldConfig is the picker configuration docs/SCALING.md gives, for the
// Inference Extension's loader (the one difference with the current
// picker's: no dataLayer.injectDefaults, a field this release does not
// know and does not need, since it injects no second source): the host
// series of modeld, the passthrough parser, the running-requests scorer
// beside the queue, KV and prefix scorers, and model affinity.
//
//go:embed modeld-picker.yaml
var ModeldConfig []byte
