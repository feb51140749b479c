package hub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"rosetop/engine/safetensors"
)

// validate checks that a downloaded file looks like what its name says before it enters the
// cache: a proxy or captive portal answering 200 with an HTML page must not leave a config.json
// that breaks every later run. JSON files must hold one JSON object, merges.txt lines of two
// tokens, a sharded checkpoint's index shard names beside it, safetensors files a well-formed
// header.
func validate(name, path string) error {
	switch {
	case strings.HasSuffix(name, ".json") && name != safetensors.IndexFile:
		return validateJSONObject(path)
	case name == "merges.txt":
		return validateMerges(path)
	case name == safetensors.IndexFile:
		if _, err := safetensors.ReadIndex(path); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "safetensors index "+path+": "))
		}
	case strings.HasSuffix(name, ".safetensors"):
		f, err := safetensors.Open(path)
		if err != nil { // the temporary file's name says nothing to the user
			return errors.New(strings.TrimPrefix(err.Error(), "safetensors "+path+": "))
		}
		return f.Close()
	}
	return nil
}

// validateJSONObject checks path holds exactly one JSON object.
func validateJSONObject(path string) error {
	b, err := os.ReadFile(path) // our own download, bounded by the file's size cap
	if err != nil {
		return err
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("not a JSON object (it starts %s)", preview(b))
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("invalid JSON after %d bytes: %v", len(b), err)
	}
	return nil
}

// validateMerges checks path is UTF-8 text of "left right" lines after an optional #version line.
func validateMerges(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" || n == 1 && strings.HasPrefix(line, "#version") {
			continue
		}
		left, right, ok := strings.Cut(line, " ")
		if !ok || left == "" || right == "" || strings.Contains(right, " ") || !utf8.ValidString(line) {
			return fmt.Errorf("line %d is not two tokens separated by a space (it starts %s)", n, preview([]byte(line)))
		}
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// preview quotes the first bytes of b for a message.
func preview(b []byte) string {
	const n = 40
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
