package api

import (
	"errors"

	"github.com/modeld/modeld/backends"
)

// structuredOutput has the backends' format compiler derive the grammar of
// a json_object or json_schema response format into f.Grammar. It runs
// while the request is checked, before any model is acquired, so a schema
// that cannot be enforced is a 400 on response_format naming the keyword,
// and nothing loads.
func structuredOutput(f *backends.ResponseFormat) error {
	err := backends.CompileResponseFormat(f)
	var br *backends.BadRequestError
	if errors.As(err, &br) {
		param := br.Param
		if param == "" {
			param = "response_format"
		}
		return badRequest(param, "%s", br.Error())
	}
	return err
}
