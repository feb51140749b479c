package serve

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// neutral is a request field rosetop does not implement, with the values that leave the result
// unchanged (null is always one): any other value is answered with a 400 naming the field.
type neutral struct {
	field  string
	values []any // JSON values as encoding/json decodes them into any
}

// neutrals lists OpenAI's and vLLM's fields that change results and that rosetop cannot honour.
// Fields that do not change results (user, metadata, store, service_tier, ...) and unknown fields
// are ignored, as vLLM ignores them.
var neutrals = []neutral{
	{"n", []any{1.0}},
	{"best_of", []any{1.0}},
	{"echo", []any{false}},
	{"suffix", []any{""}},
	{"logprobs", []any{false}},
	{"top_logprobs", []any{0.0}},
	{"prompt_logprobs", nil},
	{"logit_bias", []any{map[string]any{}}},
	{"presence_penalty", []any{0.0}},
	{"frequency_penalty", []any{0.0}},
	{"repetition_penalty", []any{1.0}},
	{"min_p", []any{0.0}},
	{"use_beam_search", []any{false}},
	{"stop_token_ids", []any{[]any{}}},
	{"include_stop_str_in_output", []any{false}},
	{"allowed_token_ids", nil},
	{"bad_words", []any{[]any{}}},
	{"truncate_prompt_tokens", nil},
	{"response_format", []any{map[string]any{"type": "text"}}},
	{"structured_outputs", nil},
	{"guided_json", nil},
	{"guided_regex", nil},
	{"guided_choice", nil},
	{"guided_grammar", nil},
	{"tools", []any{[]any{}}},
	{"tool_choice", []any{"none"}},
	{"functions", []any{[]any{}}},
	{"function_call", []any{"none"}},
	{"audio", nil},
	{"modalities", []any{[]any{"text"}}},
	{"prediction", nil},
	{"reasoning_effort", nil},
	{"prompt_embeds", nil},
	{"continue_final_message", []any{false}},
	{"add_generation_prompt", []any{true}},
	{"chat_template", nil},
}

// checkNeutral answers a 400 for the first field of body (a JSON object's members) that is set to
// a value other than its neutral ones.
func checkNeutral(body map[string]json.RawMessage) *apiError {
	for _, n := range neutrals {
		raw, ok := body[n.field]
		if !ok || isNull(raw) {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return badRequest(n.field, "", "'%s': %v", n.field, err)
		}
		if !isOneOf(v, n.values) {
			return unsupported(n.field, "is not supported by rosetop"+allowedValues(n.values))
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

// allowedValues says which values are accepted, e.g. " (only null or 1)".
func allowedValues(values []any) string {
	parts := []string{"null"}
	for _, v := range values {
		b, _ := json.Marshal(v) // values are plain JSON
		parts = append(parts, string(b))
	}
	return " (only " + strings.Join(parts, " or ") + ")"
}
