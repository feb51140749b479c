package serve

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// neutralValues returns, for a request field that changes results and that rosetop does not
// implement (OpenAI's and vLLM's), the values that leave the result unchanged (null is always
// one); ok is false for every other field. Fields that do not change results (user, metadata,
// store, service_tier, ...) and unknown fields are ignored, as vLLM ignores them. The values are
// as encoding/json decodes JSON into any.
func neutralValues(field string) (values []any, ok bool) {
	switch field {
	case "repetition_penalty":
		return []any{1.0}, true
	case "presence_penalty", "frequency_penalty", "min_p":
		return []any{0.0}, true
	case "use_beam_search", "continue_final_message":
		return []any{false}, true
	case "add_generation_prompt":
		return []any{true}, true
	case "suffix":
		return []any{""}, true
	case "logit_bias":
		return []any{map[string]any{}}, true
	case "bad_words", "tools", "functions":
		return []any{[]any{}}, true
	case "tool_choice", "function_call":
		return []any{"none"}, true
	case "response_format":
		return []any{map[string]any{"type": "text"}}, true
	case "modalities":
		return []any{[]any{"text"}}, true
	case "allowed_token_ids", "truncate_prompt_tokens", "structured_outputs", "guided_json",
		"guided_regex", "guided_choice", "guided_grammar", "audio", "prediction", "reasoning_effort",
		"prompt_embeds", "chat_template":
		return nil, true
	}
	return nil, false
}

// checkNeutral answers a 400 for the first field of body (a JSON object's members, in name
// order) that rosetop does not implement and that holds a value other than its neutral ones.
func checkNeutral(body map[string]json.RawMessage) *apiError {
	fields := make([]string, 0, len(body))
	for f := range body {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		values, ok := neutralValues(f)
		raw := body[f]
		if !ok || isNull(raw) {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return badRequest(f, "", "'%s': %v", f, err)
		}
		if !isOneOf(v, values) {
			return unsupported(f, raw, values)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func isOneOf(v any, values []any) bool {
	for _, ok := range values {
		if reflect.DeepEqual(v, ok) {
			return true
		}
	}
	return false
}

// unsupported is the 400 for a field set to a value rosetop cannot honour; it names the values
// accepted.
func unsupported(field string, raw json.RawMessage, values []any) *apiError {
	accepted := []string{"null"}
	for _, v := range values {
		b, _ := json.Marshal(v) // plain JSON values
		accepted = append(accepted, string(b))
	}
	got := strings.Join(strings.Fields(string(raw)), " ")
	if len(got) > 40 {
		n := 40
		for !utf8.RuneStart(got[n]) {
			n--
		}
		got = got[:n] + "..."
	}
	return badRequest(field, "unsupported_parameter", "Unsupported parameter: '%s' is %s; rosetop supports only %s",
		field, got, strings.Join(accepted, " or "))
}
