package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// parseJSONL reads one {"prompt": TEXT, "output_len": N} object per line; blank lines are
// skipped, other fields ignored. output_len may be left out when --output-len gives it (validate).
func parseJSONL(ctx context.Context, r io.Reader) ([]datasetRow, error) {
	return parsePromptLines(ctx, r, "output_len")
}

// parseCustom reads vLLM's custom dataset (vllm/benchmarks/datasets/custom.py): one
// {"prompt": TEXT} object per line, with the output length in "output_tokens", which vLLM reads
// only when --custom-output-len is -1 (validate); blank lines are skipped, other fields ignored.
func parseCustom(ctx context.Context, r io.Reader) ([]datasetRow, error) {
	return parsePromptLines(ctx, r, "output_tokens")
}

// jsonlLine and customLine are a line of the two prompt-per-line formats.
type jsonlLine struct {
	Prompt    *string `json:"prompt"`
	OutputLen *int    `json:"output_len"`
}

type customLine struct {
	Prompt    *string `json:"prompt"`
	OutputLen *int    `json:"output_tokens"`
}

// parsePromptLines reads one {"prompt": TEXT, FIELD: N} object per line, FIELD (the output
// length) "output_len" or "output_tokens" and optional, each line's own field type-checked alone.
func parsePromptLines(ctx context.Context, r io.Reader, field string) ([]datasetRow, error) {
	want := fmt.Sprintf(`{"prompt": TEXT, %q: N}`, field)
	var rows []datasetRow
	err := eachLine(ctx, r, func(n int, line []byte) error {
		var prompt *string
		var outputLen *int
		var err error
		if field == "output_tokens" {
			var row customLine
			err = json.Unmarshal(line, &row)
			prompt, outputLen = row.Prompt, row.OutputLen
		} else {
			var row jsonlLine
			err = json.Unmarshal(line, &row)
			prompt, outputLen = row.Prompt, row.OutputLen
		}
		switch {
		case err != nil:
			return fmt.Errorf("line %d: not a JSON object %s (%s)", n, want, jsonProblem(err))
		case prompt == nil || *prompt == "":
			return fmt.Errorf("line %d: no \"prompt\" text", n)
		case outputLen != nil && (*outputLen < 1 || *outputLen > maxRequestTokens):
			return fmt.Errorf("line %d: %q must be an integer from 1 to %d", n, field, maxRequestTokens)
		case len(rows) >= maxDatasetRows:
			return fmt.Errorf("more than %d lines: split the file", maxDatasetRows)
		}
		row := datasetRow{prompt: *prompt, line: n} // outputLen 0: the flags'
		if outputLen != nil {
			row.outputLen = *outputLen
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no lines: want one %s object per line", want)
	}
	return rows, nil
}
