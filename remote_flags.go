package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"rosetop/bench"
	"rosetop/remote"
)

// remoteOptions are the flags of a server outside this process (--endpoint). The API key is
// never exported: it prints as [redacted] and the JSON leaves it out.
type remoteOptions struct {
	Endpoint        string        `json:"endpoint,omitempty"`
	Fleet           []string      `json:"fleet,omitempty"` // --endpoint given again (--watch only): the other servers watched
	API             string        `json:"api,omitempty"`   // completions | chat ("": completions)
	APIKey          remote.Secret `json:"-"`
	ExtraBody       string        `json:"extra_body,omitempty"`
	RequestTimeoutS float64       `json:"request_timeout_s,omitempty"`
	FirstByteS      float64       `json:"first_byte_timeout_s,omitempty"`
	StallS          float64       `json:"stall_timeout_s,omitempty"`
	MetricsURL      string        `json:"metrics_url,omitempty"`
	Tokenizer       string        `json:"tokenizer,omitempty"`
	Watch           bool          `json:"watch,omitempty"`
}

// The flags that only mean something with --endpoint, and those that mean nothing with it:
// the server runs its own engine and scheduler.
var (
	remoteOnlyFlags = []string{"watch", "api", "api-key", "extra-body", "request-timeout", "first-byte-timeout", "stall-timeout", "metrics-url", "tokenizer"}
	engineOnlyFlags = []string{"device", "paged-attn", "cuda-graph", "capture-ahead", "gpu-memory-fraction", "threads",
		"tokenize-workers", "no-prefix-cache", "max-batch-size", "prefill-max-batch-size", "prefill-max-tokens", "policy",
		"burst-quiet-us", "max-seq-len", "nvtx", "stream-interval", "prefill-max-batch-sizes"}
)

// remoteFlags binds the --endpoint flags to o.
func remoteFlags(fs *flag.FlagSet, o *remoteOptions) {
	fs.Var(&endpointFlag{o: o}, "endpoint", "drive and watch an OpenAI-compatible server at this API root (vLLM, SGLang, TGI, llama.cpp, Ollama, rosetop serve; watched: also NVIDIA Dynamo's frontend, SGLang's router), e.g. http://127.0.0.1:8000/v1; given again with --watch, watch each of those servers and the fleet they make")
	fs.StringVar(&o.API, "api", o.API, "--endpoint: completions (POST /completions) | chat (POST /chat/completions) (default completions)")
	fs.Var(secretFlag{&o.APIKey}, "api-key", "--endpoint: bearer token (default $OPENAI_API_KEY); never printed or exported")
	fs.StringVar(&o.ExtraBody, "extra-body", o.ExtraBody, `--endpoint: a JSON object merged into every request body, e.g. '{"top_k": 1}'`)
	secondsVar(fs, &o.RequestTimeoutS, "request-timeout", 0, 86400, "--endpoint: seconds one request may take (0: 600)")
	secondsVar(fs, &o.FirstByteS, "first-byte-timeout", 0, 86400, "--endpoint: seconds from a request to its first byte of reply (0: only --request-timeout bounds it)")
	secondsVar(fs, &o.StallS, "stall-timeout", 0, 86400, "--endpoint: seconds a stream may go without a byte (0: only --request-timeout bounds it)")
	fs.StringVar(&o.MetricsURL, "metrics-url", o.MetricsURL, "--endpoint: the server's Prometheus page (default: /metrics on the endpoint's host)")
	fs.BoolVar(&o.Watch, "watch", o.Watch, "--endpoint, the dashboard only: watch the server without sending it any request: its queue, KV cache, throughput and latency histograms from its Prometheus metrics, which it must serve (see --metrics-url)")
	fs.StringVar(&o.Tokenizer, "tokenizer", o.Tokenizer, "--endpoint: tokenizer counting what the server does not (GPT-2 BPE format: a Hugging Face directory or id; default GPT-2's)")
}

// endpointFlag is --endpoint: the first value is the endpoint, each later one a fleet member.
type endpointFlag struct {
	o    *remoteOptions
	seen bool // a value was given on the command line: the next one is a member
}

func (f *endpointFlag) String() string {
	if f == nil || f.o == nil {
		return ""
	}
	return f.o.Endpoint
}

func (f *endpointFlag) Set(s string) error {
	if f.seen {
		f.o.Fleet = append(f.o.Fleet, s)
		return nil
	}
	f.o.Endpoint, f.seen = s, true
	return nil
}

// secretFlag is --api-key: its value never shows in usage or errors.
type secretFlag struct{ p *remote.Secret }

func (f secretFlag) String() string {
	if f.p == nil || *f.p == "" {
		return ""
	}
	return f.p.String()
}

func (f secretFlag) Set(s string) error {
	*f.p = remote.Secret(s)
	return nil
}

// redactedArgs is args with the value of every secret flag (--api-key X, -api-key=X) replaced,
// for the command line a recording keeps and replay --summary prints.
func redactedArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		if out[i] == "--" {
			break // the rest are not flags
		}
		name, hasValue := flagArg(out[i])
		if name != "api-key" {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.IndexByte(out[i], '=')+1] + "[redacted]"
		} else if i+1 < len(out) {
			i++
			out[i] = "[redacted]"
		}
	}
	return out
}

// checkRemote applies the --endpoint rules to o, given the flags set explicitly: remote flags
// need --endpoint; engine flags given with it are refused by name (a job's presets of them are
// ignored); --pretok needs an explicit --tokenizer, the server's, and the completions API.
func (o *options) checkRemote(set map[string]bool, stderr io.Writer) error {
	given := func(names []string) []string {
		var out []string
		for _, n := range names {
			if set[n] {
				out = append(out, "--"+n)
			}
		}
		return out
	}
	if o.Endpoint == "" && len(o.Fleet) == 0 { // an empty first --endpoint with more is refused below, not dropped
		if set["endpoint"] { // --endpoint "" (an unset $URL) would measure the in-process engine instead
			return checkEndpoint(o.Endpoint)
		}
		if g := given(remoteOnlyFlags); len(g) > 0 {
			return badFlag("%s: only with --endpoint", strings.Join(g, ", "))
		}
		return nil
	}
	if g := given(engineOnlyFlags); len(g) > 0 {
		verb := "mean"
		if len(g) == 1 {
			verb = "means"
		}
		return badFlag("%s %s nothing with --endpoint: the server runs its own engine and scheduler (set them there)", strings.Join(g, ", "), verb)
	}
	if err := checkEndpoint(o.Endpoint); err != nil {
		return err
	}
	if err := o.checkFleet(); err != nil {
		return err
	}
	if _, err := remote.ParseAPI(cmp.Or(o.API, "completions")); err != nil {
		return badFlag("--api: unknown API %q (valid: completions, chat)", o.API)
	}
	if _, err := remote.ParseExtraBody(o.ExtraBody); err != nil {
		return badFlag("--extra-body: %s", strings.TrimPrefix(err.Error(), remote.ErrConfig.Error()+": "))
	}
	if o.Pretok && (o.Tokenizer == "" || o.API == "chat") {
		why := "token ids need the server's own tokenizer: give it with --tokenizer"
		if o.API == "chat" {
			why = "token ids need --api completions"
		}
		if set["pretok"] {
			return badFlag("--pretok with --endpoint: %s", why)
		}
		o.Pretok = false
		fmt.Fprintf(stderr, "rosetop: the job's --pretok is off against --endpoint: %s\n", why)
	}
	return nil
}

// checkFleet applies the rules of --endpoint given more than once: only watched, each at its own
// /metrics, each a valid URL given once.
func (o *options) checkFleet() error {
	if len(o.Fleet) == 0 {
		return nil
	}
	switch cmd := cmp.Or(o.command, "bench"); {
	case !o.Watch && cmd != "dashboard": // --watch is the dashboard's alone
		return badFlag("--endpoint given %d times: several servers are only watched, on the dashboard (rosetop --watch --endpoint URL --endpoint URL): rosetop %s drives one", 1+len(o.Fleet), cmd)
	case !o.Watch:
		return badFlag("--endpoint given %d times: several servers are only watched, not driven: add --watch (or drive one)", 1+len(o.Fleet))
	case o.MetricsURL != "":
		return badFlag("--metrics-url names one server's page: with several --endpoint, each server's /metrics is read on its own host")
	case 1+len(o.Fleet) > remote.MaxFleet:
		return badFlag("--endpoint given %d times: at most %d servers are watched at once", 1+len(o.Fleet), remote.MaxFleet)
	}
	seen := map[string]bool{strings.TrimRight(o.Endpoint, "/"): true}
	for _, e := range o.Fleet {
		if err := checkEndpoint(e); err != nil {
			return err
		}
		k := strings.TrimRight(e, "/")
		if seen[k] {
			return badFlag("--endpoint %s: given twice", printable(e))
		}
		seen[k] = true
	}
	return nil
}

// flagNamed is err's message in which a remote.TokenizerError, which names only its value,
// names the flag that gave it: "--tokenizer /tmp: holds no tokenizer.json or vocab.json (...)".
func flagNamed(err error) string {
	msg := err.Error()
	var te *remote.TokenizerError
	if errors.As(err, &te) {
		msg = strings.Replace(msg, te.Error(), te.Named("--tokenizer"), 1)
	}
	return msg
}

// checkEndpoint refuses an endpoint URL the client would change silently.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return badFlag("--endpoint %q: want an http or https URL like http://127.0.0.1:8000/v1", printable(raw))
	case u.Port() != "" && !validPort(u.Port()):
		return badFlag("--endpoint %s://%s: port %q is not a number from 1 to 65535", u.Scheme, printable(u.Host), printable(u.Port()))
	case u.User != nil:
		return badFlag("--endpoint: put credentials in --api-key or OPENAI_API_KEY, not the URL")
	case u.RawQuery != "" || u.Fragment != "":
		return badFlag("--endpoint %s://%s%s: want the API root without a query or fragment (they may hold a credential: give it with --api-key)", u.Scheme, u.Host, printable(u.Path))
	}
	return nil
}

// validPort reports whether p is a TCP port a client can dial: 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// provider is where the session's engines come from: rosetop's own, or the --endpoint server.
func (o options) provider() (bench.Provider, error) {
	if o.Endpoint == "" {
		return bench.NewInProcess(o.inProcess()), nil
	}
	api, err := remote.ParseAPI(cmp.Or(o.API, "completions"))
	if err != nil {
		return nil, err
	}
	extra, err := remote.ParseExtraBody(o.ExtraBody)
	if err != nil {
		return nil, err
	}
	key := o.APIKey
	if key == "" {
		key = remote.Secret(os.Getenv("OPENAI_API_KEY"))
	}
	cfg := remote.Config{
		BaseURL: o.Endpoint, APIKey: key, Extra: extra,
		RequestTimeout:   time.Duration(o.RequestTimeoutS * float64(time.Second)),
		FirstByteTimeout: time.Duration(o.FirstByteS * float64(time.Second)),
		StallTimeout:     time.Duration(o.StallS * float64(time.Second)),
		MaxConns:         max(remote.DefaultMaxConns, min(o.NumRequests, 1024)),
	}
	return remote.NewProvider(remote.ProviderOptions{Client: cfg, API: api, Model: o.Model, MetricsURL: o.MetricsURL, Tokenizer: o.Tokenizer, Watch: o.Watch, Fleet: o.Fleet})
}
