// Package hub finds Hugging Face models in the local hub cache and downloads them into it.
//
// The cache layout is Hugging Face's own, so models fetched by the Python libraries are found
// here and the other way round:
//
//	$HF_HUB_CACHE (or $HF_HOME/hub, or ~/.cache/huggingface/hub)
//	  models--ORG--NAME/
//	    refs/main                  commit hash of the snapshot "main" points at
//	    blobs/<etag>               file contents
//	    snapshots/<commit>/<file>  the repository's files (symlinks into blobs/, or plain files)
//
// A download goes to blobs/<commit>.<file>.incomplete, resumes from there with a Range request
// (also after a stall: no byte for Options.StallTimeout), is checked against the size the server
// announced and against what its name says it is (JSON, merges, a safetensors header), and only
// then is renamed into blobs/ and linked into snapshots/: a file under snapshots/ is always
// complete and well-formed. A lock under .locks/ (where huggingface_hub keeps its own) lets one
// process at a time download a file; another waits for it and then finds the file in place.
package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rosetop/engine/safetensors"
	"rosetop/internal/regular"
)

// Sentinel errors; Resolve's errors wrap one of them (or a context error).
var (
	// ErrInvalidID: the id is not NAME or ORG/NAME.
	ErrInvalidID = errors.New("invalid Hugging Face model id")
	// ErrNotCached: the model is not in the cache and cannot be downloaded (offline mode, or the
	// endpoint cannot be reached).
	ErrNotCached = errors.New("not in the Hugging Face cache")
	// ErrNotFound: the endpoint answered 404 for a required file.
	ErrNotFound = errors.New("not found on the hub")
	// ErrDenied: the endpoint answered 401 or 403 (gated or private repository, bad token).
	ErrDenied = errors.New("access denied by the hub")
	// ErrSizeMismatch: a download's length differs from the size the server announced.
	ErrSizeMismatch = errors.New("downloaded size does not match")
	// ErrDownload: any other failed download (HTTP error status, interrupted transfer, disk).
	ErrDownload = errors.New("download failed")
	// ErrStalled: the server sent nothing for Options.StallTimeout (always with ErrDownload).
	ErrStalled = errors.New("download stalled")
	// ErrBadFile: the server's file is not what its name says (an HTML page as config.json, a
	// truncated safetensors header, an oversized JSON file); it was not cached.
	ErrBadFile = errors.New("downloaded file is not valid")
)

// DefaultEndpoint is the public hub, used when $HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// Options configure Resolve. The zero value reads the process environment, uses a default HTTP
// client and prints no progress.
type Options struct {
	Getenv     func(string) string // environment lookup; nil: os.Getenv
	HTTPClient *http.Client        // nil: a client with connect/TLS/header timeouts (no overall limit)
	Progress   io.Writer           // download progress bar; nil: silent
	Now        func() time.Time    // clock for the progress bar's rate and redraw limit; nil: time.Now
	Attempts   int                 // tries per file, each resuming where the last stopped; 0: 3
	// StallTimeout cuts a transfer that receives nothing for this long (a pinned file resumes on
	// the next attempt or run); 0: 30 s.
	StallTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultClient()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = defaultStallTimeout
	}
	return o
}

// defaultClient bounds every phase that can hang before data flows, but not the transfer itself:
// a multi-gigabyte checkpoint may take many minutes; the stall timeout cuts a transfer that stops,
// and the caller's context can cancel it.
func defaultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}}
}

// ValidID reports whether id looks like a hub model id: NAME or ORG/NAME, each of letters,
// digits, '-', '_' and '.', not starting with '-' or '.', without "--" or "..".
func ValidID(id string) bool {
	parts := strings.Split(id, "/")
	if len(parts) > 2 || len(id) > 96 || strings.Contains(id, "--") || strings.Contains(id, "..") {
		return false
	}
	for _, p := range parts {
		if p == "" || p[0] == '-' || p[0] == '.' {
			return false
		}
		for _, r := range p {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
				return false
			}
		}
	}
	return true
}

// CacheRoot returns the hub cache directory: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE (its
// older name), else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// $HOME/.cache/huggingface/hub. As in huggingface_hub, a leading ~ and $VAR or ${VAR} in these
// paths are expanded (a value from a .env file or a unit file reaches the program unexpanded).
func CacheRoot(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	home := getenv("HOME")
	if home == "" {
		home = getenv("USERPROFILE")
	}
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := getenv(v); d != "" {
			return expandPath(d, home, getenv), nil
		}
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(expandPath(d, home, getenv), "hub"), nil
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(expandPath(d, home, getenv), "huggingface", "hub"), nil
	}
	if home == "" {
		return "", errors.New("cannot locate the Hugging Face cache: set HF_HOME or HOME")
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

// expandPath expands a leading "~" or "~/" to home (when known) and then $VAR and ${VAR} from
// getenv, leaving unset variables and "~user" as written, as Python's expanduser and expandvars do.
func expandPath(p, home string, getenv func(string) string) string {
	if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
		p = home + p[1:]
	}
	return os.Expand(p, func(v string) string {
		if x := getenv(v); x != "" {
			return x
		}
		return "$" + v
	})
}

// RepoDir is the cache folder of model id under root.
func RepoDir(root, id string) string {
	return filepath.Join(root, "models--"+strings.ReplaceAll(id, "/", "--"))
}

// repoFile is a file Resolve fetches.
type repoFile struct {
	name     string
	required bool  // a model directory needs it; an optional one may be absent from a repository
	maxBytes int64 // larger is refused as not this file; 0: no limit (the weights)
}

// fileSet is what one kind of Resolve fetches and when a snapshot holds enough of it.
type fileSet struct {
	what    string     // "model", "tokenizer": for messages
	files   []repoFile // in download order
	weights bool       // then fetch the weights: model.safetensors, or an index and its shards
	remedy  string     // what to pass instead when the files cannot be had
	// enough reports whether dir holds what the caller needs beyond the required files.
	enough func(dir string) bool
}

// The engine's own read limits of the small files.
const maxConfig, maxTokenizer, maxIndex = 1 << 20, 64 << 20, 64 << 20

// modelFiles are a whole model's files, in download order: config.json first (a cheap request
// that tells a missing model apart early and pins the commit), the weights last, so that a
// snapshot with config and weights is never missing tokenizer files that the repository has.
func modelFiles() fileSet {
	return fileSet{what: "model", remedy: "pass a local model directory or random:gpt2",
		files: []repoFile{{"config.json", true, maxConfig}, {"vocab.json", false, maxTokenizer}, {"merges.txt", false, maxTokenizer},
			{"tokenizer.json", false, maxTokenizer}, {"tokenizer_config.json", false, maxTokenizer},
			{"added_tokens.json", false, maxTokenizer}},
		weights: true,
		enough:  hasWeights,
	}
}

// hasWeights reports whether dir holds model.safetensors, or a sharded checkpoint's index and
// every shard it lists (the engine reads them in that order of preference, as transformers does).
func hasWeights(dir string) bool {
	if isFile(filepath.Join(dir, "model.safetensors")) {
		return true
	}
	idx, err := safetensors.ReadIndex(filepath.Join(dir, safetensors.IndexFile))
	if err != nil {
		return false
	}
	for _, s := range idx.Shards() {
		if !isFile(filepath.Join(dir, s)) {
			return false
		}
	}
	return true
}

// tokenizerFiles are a model's config and tokenizer files without its weights: enough when
// tokenizer.json or vocab.json is there.
func tokenizerFiles() fileSet {
	return fileSet{what: "tokenizer", remedy: "pass a local directory holding tokenizer.json or vocab.json",
		files: []repoFile{{"config.json", true, maxConfig}, {"vocab.json", false, maxTokenizer}, {"merges.txt", false, maxTokenizer},
			{"tokenizer.json", false, maxTokenizer}, {"tokenizer_config.json", false, maxTokenizer},
			{"added_tokens.json", false, maxTokenizer}},
		enough: func(dir string) bool {
			return isFile(filepath.Join(dir, "tokenizer.json")) || isFile(filepath.Join(dir, "vocab.json"))
		},
	}
}

// Resolve returns a local directory holding model id's config.json and weights (model.safetensors,
// or the index and shards of a sharded checkpoint) and its tokenizer files, where the repository
// has them: the cached snapshot when there is one,
// without touching the network; otherwise it downloads the files from $HF_ENDPOINT into the cache.
func Resolve(ctx context.Context, id string, o Options) (string, error) {
	return resolve(ctx, id, o, modelFiles())
}

// ResolveTokenizer returns a local directory holding model id's config.json and its tokenizer.json
// or vocab.json (with merges.txt where the repository has it), as Resolve does but without the
// weights. ErrNotFound when the repository has neither tokenizer file.
func ResolveTokenizer(ctx context.Context, id string, o Options) (string, error) {
	return resolve(ctx, id, o, tokenizerFiles())
}

func resolve(ctx context.Context, id string, o Options, set fileSet) (string, error) {
	o = o.withDefaults()
	if !ValidID(id) {
		return "", fmt.Errorf("%w: %q (want NAME or ORG/NAME, e.g. gpt2 or openai-community/gpt2)", ErrInvalidID, id)
	}
	root, err := CacheRoot(o.Getenv)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", set.what, id, err)
	}
	repo := RepoDir(root, id)
	if dir, ok := cachedSnapshot(repo, set); ok {
		return dir, nil
	}
	if name, v := offline(o.Getenv); name != "" {
		return "", notCached("%s %s is not in the Hugging Face cache (%s%s) and %s=%s forbids downloading it: run once with %s unset and network access to fill the cache, or %s",
			set.what, id, repo, brokenLink(repo), name, v, name, set.remedy)
	}
	endpoint := strings.TrimRight(o.Getenv("HF_ENDPOINT"), "/")
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	d := &downloader{o: o, id: id, repo: repo, endpoint: endpoint, token: token(o.Getenv), set: set}
	dir, err := d.run(ctx)
	if err == nil && !set.enough(dir) {
		return "", fmt.Errorf("%w: model %s at %s has no tokenizer.json or vocab.json", ErrNotFound, id, endpoint)
	}
	return dir, err
}

// offline returns the variable that forbids downloads and its value, or "": HF_HUB_OFFLINE, or
// when that is unset the older TRANSFORMERS_OFFLINE, set to 1, true, yes or on in any case.
func offline(getenv func(string) string) (name, value string) {
	name = "HF_HUB_OFFLINE"
	if getenv(name) == "" {
		name = "TRANSFORMERS_OFFLINE"
	}
	switch v := getenv(name); strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return name, v
	}
	return "", ""
}

// notCachedError is ErrNotCached with a message that says it once, in one sentence with the
// remedy; cause (may be nil) is why the download could not fill the cache.
type notCachedError struct {
	msg   string
	cause error
}

func (e *notCachedError) Error() string   { return e.msg }
func (e *notCachedError) Unwrap() []error { return []error{ErrNotCached, e.cause} }

// notCached formats the message; an error among args is kept as the cause.
func notCached(format string, args ...any) error {
	e := &notCachedError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.cause = err
		}
	}
	return e
}

// maxRef bounds refs/main, which holds a commit hash.
const maxRef = 4 << 10

// cachedSnapshot finds a complete snapshot: the one refs/main names, else the newest complete one.
func cachedSnapshot(repo string, set fileSet) (string, bool) {
	// A regular file of a few bytes: a named pipe there would block a plain read forever.
	if ref, err := regular.ReadFile(filepath.Join(repo, "refs", "main"), maxRef); err == nil {
		if c := strings.TrimSpace(string(ref)); plainName(c) {
			dir := filepath.Join(repo, "snapshots", c)
			if complete(dir, set) {
				return dir, true
			}
		}
	}
	entries, err := os.ReadDir(filepath.Join(repo, "snapshots"))
	if err != nil {
		return "", false
	}
	best, bestTime := "", time.Time{}
	for _, e := range entries {
		dir := filepath.Join(repo, "snapshots", e.Name())
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || !complete(dir, set) {
			continue
		}
		if best == "" || fi.ModTime().After(bestTime) {
			best, bestTime = dir, fi.ModTime()
		}
	}
	return best, best != ""
}

// complete reports whether dir holds every required file of set and enough of the rest; Stat
// follows symlinks into blobs/, so a dangling link does not count.
func complete(dir string, set fileSet) bool {
	for _, f := range set.files {
		if f.required && !isFile(filepath.Join(dir, f.name)) {
			return false
		}
	}
	return set.enough(dir)
}

// brokenLink names the first link of repo's snapshots that leads nowhere (a blob deleted, a
// snapshot copied without its blobs), as "; the cached snapshots/C/F links to T, which does not
// exist"; "" when there is none.
func brokenLink(repo string) string {
	snaps, _ := os.ReadDir(filepath.Join(repo, "snapshots"))
	for _, sn := range snaps {
		files, _ := os.ReadDir(filepath.Join(repo, "snapshots", sn.Name()))
		for _, f := range files {
			if target, ok := regular.DanglingLink(filepath.Join(repo, "snapshots", sn.Name(), f.Name())); ok {
				return fmt.Sprintf("; its snapshots/%s/%s links to %s, which does not exist", sn.Name(), f.Name(), target)
			}
		}
	}
	return ""
}

// isFile reports whether path is a regular file, following symlinks.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
