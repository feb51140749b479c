package remote

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// parser is a JSON scanner over one value. Every method reports whether the input so far is
// valid; on false the parse is abandoned.
type parser struct {
	b       []byte
	i       int
	depth   int  // open objects and arrays
	wasNull bool // the last optString read a null
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// lit consumes the literal s.
func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// null consumes a null, if that is what comes next.
func (p *parser) null() bool {
	p.ws()
	return p.lit("null")
}

// object reads {"key": value, ...}, calling member for each key with the parser at the value.
func (p *parser) object(member func(key []byte) bool) bool {
	p.ws()
	if !p.lit("{") || !p.enter() {
		return false
	}
	defer p.leave()
	p.ws()
	if p.lit("}") {
		return true
	}
	for {
		p.ws()
		key, ok := p.rawString()
		if !ok {
			return false
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(p.b[p.i-len(key)-2:p.i], &s) != nil {
				return false
			}
			key = []byte(s)
		}
		p.ws()
		if !p.lit(":") || !member(key) {
			return false
		}
		p.ws()
		if p.lit("}") {
			return true
		}
		if !p.lit(",") {
			return false
		}
	}
}

// array reads [value, ...], calling elem with the parser at each value.
func (p *parser) array(elem func() bool) bool {
	p.ws()
	if !p.lit("[") || !p.enter() {
		return false
	}
	defer p.leave()
	p.ws()
	if p.lit("]") {
		return true
	}
	for {
		if !elem() {
			return false
		}
		p.ws()
		if p.lit("]") {
			return true
		}
		if !p.lit(",") {
			return false
		}
	}
}

func (p *parser) enter() bool { p.depth++; return p.depth <= maxDepth }
func (p *parser) leave()      { p.depth-- }

// rawString reads a string and returns its bytes between the quotes, escapes unresolved.
func (p *parser) rawString() ([]byte, bool) {
	if !p.lit(`"`) {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return nil, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return nil, false
				}
				if _, err := strconv.ParseUint(string(p.b[p.i+2:p.i+6]), 16, 16); err != nil {
					return nil, false
				}
				p.i += 6
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		default:
			p.i++
		}
	}
	return nil, false
}

// optString reads a string or null into *dst (null leaves it); keep: store the value.
func (p *parser) optString(dst *string, keep bool) bool {
	p.wasNull = p.null()
	if p.wasNull {
		return true
	}
	start := p.i
	raw, ok := p.rawString()
	if !ok {
		return false
	}
	if !keep {
		return true
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		*dst = string(raw)
		return true
	}
	// Escapes or invalid UTF-8: let encoding/json resolve them exactly.
	return json.Unmarshal(p.b[start:p.i], dst) == nil
}

// anyString reads any value, storing it in *dst when it is a string.
func (p *parser) anyString(dst *string) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '"' {
		return p.optString(dst, true)
	}
	*dst = ""
	return p.skip()
}

// optInt reads an integer or null into *dst (null: -1).
func (p *parser) optInt(dst *int64) bool {
	if p.null() {
		*dst = -1
		return true
	}
	return p.int(dst)
}

// int reads an integer: a JSON number without fraction or exponent that fits in an int64.
func (p *parser) int(dst *int64) bool {
	p.ws()
	start := p.i
	if !p.number() {
		return false
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		return false
	}
	*dst = v
	return true
}

// number reads a JSON number.
func (p *parser) number() bool {
	p.lit("-")
	switch {
	case p.lit("0"):
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.lit(".") && !p.digits() {
		return false
	}
	if p.lit("e") || p.lit("E") {
		if !p.lit("+") {
			p.lit("-")
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits.
func (p *parser) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// skip reads and checks any value.
func (p *parser) skip() bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch p.b[p.i] {
	case '{':
		return p.object(func([]byte) bool { return p.skip() })
	case '[':
		return p.array(p.skip)
	case '"':
		_, ok := p.rawString()
		return ok
	case 't':
		return p.lit("true")
	case 'f':
		return p.lit("false")
	case 'n':
		return p.lit("null")
	}
	return p.number()
}
