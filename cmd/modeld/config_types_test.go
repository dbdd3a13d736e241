package main

import (
	"regexp"
	"strings"
	"testing"
)

// serve --help shows each setting's type after its flag: a duration, an
// int, a size, a list... never "string" for a value that is none, and no
// type for a boolean.
func TestServeHelpShowsSettingTypes(t *testing.T) {
	out, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir()}, "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for flag, typ := range map[string]string{"keep-alive": "duration", "max-loaded": "int", "ram-budget": "size",
		"origins": "list", "listen": "host:port", "home": "path", "log-level": "level"} {
		if !regexp.MustCompile(`--` + flag + ` ` + regexp.QuoteMeta(typ) + `\s`).MatchString(out) {
			t.Errorf("serve --help does not show --%s %s", flag, typ)
		}
	}
	for _, s := range settings {
		if !s.hasFlag() {
			continue
		}
		if s.flagType() == "string" {
			t.Errorf("--%s shows as a string: give it a type in settingTypes (config_types.go)", s.name)
		}
		if s.boolean && regexp.MustCompile(`--`+s.name+` \w+\s{2,}`).MatchString(out) {
			t.Errorf("boolean --%s shows a type", s.name)
		}
	}
	if strings.Contains(out, " string ") {
		t.Errorf("serve --help still shows a string type:\n%s", out)
	}
}
