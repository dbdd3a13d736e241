package main

// settingTypes names the kind of value each setting takes, as serve --help
// shows it after the flag (--keep-alive duration). A setting not listed
// shows "string", a boolean one nothing.
var settingTypes = map[string]string{
	"home": "path", "config": "path", "lib-dir": "path", "api-key-file": "path",
	"listen": "host:port", "host": "address",
	"log-level": "level", "log-format": "format", "hf-endpoint": "url", "api-key": "key",
	"keep-alive": "duration", "load-wait": "duration", "batch-wait": "duration",
	"stall-timeout": "duration", "runner-wrapper": "command", "shutdown-grace": "duration", "probe-timeout": "duration",
	"max-loaded": "int", "queue-size": "int", "chat-slots": "int", "context-size": "int", "threads": "int",
	"batch-threads": "int", "batch-tokens": "int", "pipeline-lanes": "int", "prompt-lookup": "int",
	"ram-budget": "size", "vram-budget": "size", "max-download": "size",
	"gpu-tasks": "list", "model-aliases": "list", "origins": "list", "allowed-hosts": "list", "extensions": "list",
	"responses-store-size": "size", "responses-store-entries": "int", "responses-store-lifetime": "duration",
	"prompt-cache-size": "size",
}

// flagType is the type serve --help shows for the setting's flag.
func (s setting) flagType() string {
	if s.boolean {
		return "bool"
	}
	if t, ok := settingTypes[s.name]; ok {
		return t
	}
	return "string"
}

// settingFlag is a setting's flag: its text as given (loadConfig parses it
// with the setting's own apply), and the type help shows.
type settingFlag struct {
	value string
	typ   string
}

func (f *settingFlag) String() string     { return f.value }
func (f *settingFlag) Set(v string) error { f.value = v; return nil }
func (f *settingFlag) Type() string       { return f.typ }
