package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// errBadFlag is wrapped by every command-line error: main prints the message and exits 2.
var errBadFlag = errors.New("bad command line")

// flagError is a one-line message about the command line; errors.Is(err, errBadFlag) holds.
type flagError struct{ msg string }

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return errBadFlag }

func badFlag(format string, args ...any) error { return &flagError{msg: fmt.Sprintf(format, args...)} }

// intFlag is an int flag that refuses values outside [lo, hi] as it parses them, so no size
// reaches an allocation unchecked.
type intFlag struct {
	p      *int
	lo, hi int
}

func intVar(fs *flag.FlagSet, p *int, name string, lo, hi int, usage string) {
	fs.Var(intFlag{p, lo, hi}, name, fmt.Sprintf("%s [%d..%d]", usage, lo, hi))
}

func (f intFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f intFlag) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("must be an integer from %d to %d", f.lo, f.hi)
		}
		return fmt.Errorf("not an integer from %d to %d", f.lo, f.hi)
	}
	if v < int64(f.lo) || v > int64(f.hi) {
		return fmt.Errorf("must be from %d to %d", f.lo, f.hi)
	}
	*f.p = int(v)
	return nil
}

// uint64Flag is a uint64 flag (a seed) that parses as intFlag does, with its kind of message.
type uint64Flag struct{ p *uint64 }

func uint64Var(fs *flag.FlagSet, p *uint64, name, usage string) {
	fs.Var(uint64Flag{p}, name, fmt.Sprintf("%s [0..%d]", usage, uint64(math.MaxUint64)))
}

func (f uint64Flag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatUint(*f.p, 10)
}

func (f uint64Flag) Set(s string) error {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return fmt.Errorf("not an integer from 0 to %d", uint64(math.MaxUint64))
	}
	*f.p = v
	return nil
}

// floatFlag is a float flag that refuses NaN, infinities and values outside [lo, hi]. A flag in
// seconds also takes a duration ("90s", "2m").
type floatFlag struct {
	p       *float64
	lo, hi  float64
	seconds bool
	openHi  bool // hi itself is refused
}

func floatVar(fs *flag.FlagSet, p *float64, name string, lo, hi float64, usage string) {
	fs.Var(floatFlag{p: p, lo: lo, hi: hi}, name, fmt.Sprintf("%s [%g..%g]", usage, lo, hi))
}

// belowVar is floatVar for a value below hi (a ratio where hi would make a length 0).
func belowVar(fs *flag.FlagSet, p *float64, name string, lo, hi float64, usage string) {
	fs.Var(floatFlag{p: p, lo: lo, hi: hi, openHi: true}, name, fmt.Sprintf("%s [%g..%g)", usage, lo, hi))
}

// secondsVar is floatVar for a time in seconds: "30", "0.5", "90s" and "2m" all parse.
func secondsVar(fs *flag.FlagSet, p *float64, name string, lo, hi float64, usage string) {
	fs.Var(floatFlag{p: p, lo: lo, hi: hi, seconds: true}, name, fmt.Sprintf("%s [%g..%g s, or a duration like 90s]", usage, lo, hi))
}

func (f floatFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f floatFlag) Set(s string) error {
	v, err := parseFinite(s)
	if err != nil && f.seconds {
		d, derr := time.ParseDuration(strings.TrimSpace(s))
		if derr != nil {
			return fmt.Errorf("not seconds (30) or a duration (30s, 2m)")
		}
		v, err = d.Seconds(), nil
	}
	if f.openHi && err != nil {
		return fmt.Errorf("%w, at least %g and below %g", err, f.lo, f.hi)
	}
	if f.openHi && (v < f.lo || v >= f.hi) {
		return fmt.Errorf("must be at least %g and below %g", f.lo, f.hi)
	}
	if err != nil {
		return fmt.Errorf("%w from %g to %g", err, f.lo, f.hi)
	}
	if v < f.lo || v > f.hi {
		if f.seconds {
			return fmt.Errorf("must be from %g to %g seconds", f.lo, f.hi)
		}
		return fmt.Errorf("must be from %g to %g", f.lo, f.hi)
	}
	*f.p = v
	return nil
}

// parseFinite parses a float and refuses NaN and infinities. A nonzero number too small for a
// float64 is the smallest one of its sign, not 0: the bounds refuse it where 0 means "off".
func parseFinite(s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("not a number")
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("must be a finite number")
	}
	if v == 0 && nonzeroMantissa(s) {
		v = math.Copysign(math.SmallestNonzeroFloat64, v)
	}
	return v, nil
}

// nonzeroMantissa reports whether the number s (as strconv.ParseFloat reads it) has a digit
// other than 0 before its exponent.
func nonzeroMantissa(s string) bool {
	s = strings.ToLower(strings.TrimLeft(s, "+-"))
	digits, exp := "123456789", "e"
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		s, digits, exp = rest, "123456789abcdef", "p"
	}
	mantissa, _, _ := strings.Cut(s, exp)
	return strings.ContainsAny(mantissa, digits)
}

// requestRate is --request-rate's value: 0 or +Inf (off: the interval schedule, every request
// at once by default), else Poisson arrivals at this rate. JSON has no infinity: +Inf is written
// "inf", as vLLM writes its result's request_rate.
type requestRate float64

// poisson says whether the rate sets the arrivals (finite and above 0).
func (r requestRate) poisson() bool { return r > 0 && !math.IsInf(float64(r), 1) }

func (r requestRate) MarshalJSON() ([]byte, error) { return infJSON(float64(r)) }

// String is the rate as --request-rate takes it: "inf" or a number.
func (r requestRate) String() string {
	if math.IsInf(float64(r), 1) {
		return "inf"
	}
	return strconv.FormatFloat(float64(r), 'g', -1, 64)
}

// infJSON is v in JSON, +Inf written "inf" (JSON has no infinity; vLLM writes it so).
func infJSON(v float64) ([]byte, error) {
	if math.IsInf(v, 1) {
		return []byte(`"inf"`), nil
	}
	return json.Marshal(v)
}

// rateFlag is --request-rate: 0 or inf (off: the interval schedule), else a finite rate in
// [minRate, maxRate].
type rateFlag struct{ p *requestRate }

func (f rateFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return f.p.String()
}

func (f rateFlag) Set(s string) error {
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && math.IsInf(v, 1) {
		*f.p = requestRate(v)
		return nil
	}
	v, err := parseFinite(s)
	if err != nil {
		return err
	}
	if v != 0 && (v < minRate || v > maxRate) {
		return fmt.Errorf("must be 0, inf, or from %g to %g requests/s", minRate, maxRate)
	}
	*f.p = requestRate(v)
	return nil
}

// invalidValue matches the flag package's message for a value its Set refused.
var invalidValue = regexp.MustCompile(`^invalid (value|boolean value) ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]+): (.*)$`)

// withSuggestion rewrites the flag package's parse error as one line that names the flag as the
// user typed it (--name), adding "did you mean" for a misspelt flag name.
func withSuggestion(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		v, err := strconv.Unquote(m[2])
		if err != nil || v == "" || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '"' }) {
			v = m[2]
		}
		why := m[4]
		if m[1] == "boolean value" {
			why = "not a boolean (true or false: --" + m[3] + " alone is true)"
			return printable(fmt.Sprintf("--%s=%s: %s", m[3], v, why))
		}
		return printable(fmt.Sprintf("--%s %s: %s", m[3], v, why))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", strings.Trim(strconv.Quote(name), `"`))
	}
	const undefined = "flag provided but not defined: -"
	if !strings.HasPrefix(msg, undefined) {
		return printable(msg)
	}
	name := strings.TrimPrefix(msg, undefined)
	if q := strconv.Quote(name); q[1:len(q)-1] != name {
		return fmt.Sprintf("unknown flag %s (see -h for the flags)", q) // a name with control characters stays on one line
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := closest(name, names); best != "" {
		return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, best)
	}
	return fmt.Sprintf("unknown flag --%s (see -h for the flags)", name)
}

// closest returns the candidate nearest to s by edit distance, or "" when none is near (more
// than a third of s's letters differ).
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/3+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD || (d == bestD && best != "" && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (adjacent swaps count one) between a and b.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// printable escapes control characters (a newline in a mistyped argument) so that a message
// stays on one line.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
