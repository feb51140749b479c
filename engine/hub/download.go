package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"rosetop/engine/safetensors"
	"rosetop/internal/oneline"
)

// downloader fetches one repository's files into the cache. It is used by one goroutine.
type downloader struct {
	o         Options
	id        string
	repo      string // models--ORG--NAME folder
	endpoint  string // without a trailing slash
	token     string // the hub token (see token), "" for none
	contacted bool   // a request got an HTTP answer: later network errors are interruptions
	set       fileSet
	rev       string // revision the files come from: "main" until a response names the commit
	pinned    bool   // rev is a commit: later files come from it even if main moves meanwhile
	snap      string // snapshots/<rev>, once the first file is in
}

// result is what one file's download produced.
type result struct {
	missing bool   // optional file the repository does not have (HTTP 404)
	commit  string // X-Repo-Commit of the response chain, "" when absent
	blob    string // path of the complete file under blobs/
}

// run fetches every file, pinning the revision to the commit the first response names, links
// them into snapshots/<commit>/ and points refs/main at it.
func (d *downloader) run(ctx context.Context) (string, error) {
	d.rev = "main"
	for _, f := range d.set.files {
		if _, err := d.fetchFile(ctx, f); err != nil {
			return "", err
		}
	}
	if d.set.weights {
		if err := d.fetchWeights(ctx); err != nil {
			return "", err
		}
	}
	if err := writeAtomic(filepath.Join(d.repo, "refs", "main"), []byte(d.rev)); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrDownload, d.name(), err)
	}
	return d.snap, nil
}

// fetchFile downloads f into the snapshot, unless an earlier, interrupted run or another process
// left it there complete. missing reports an optional file the repository does not have.
func (d *downloader) fetchFile(ctx context.Context, f repoFile) (missing bool, err error) {
	if d.pinned {
		// One process at a time writes a pinned file's .incomplete part (another would truncate
		// it under this one) and, once it is in, the others find it here.
		lock := filepath.Join(filepath.Dir(d.repo), ".locks", filepath.Base(d.repo), d.rev+"."+f.name+".lock")
		unlock, err := lockFile(ctx, lock, func() {
			if d.o.Progress != nil {
				fmt.Fprintf(d.o.Progress, "%s %s: waiting for another process downloading it (lock %s)\n", d.id, f.name, lock)
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("%s: %s: download cancelled: %w", d.name(), f.name, ctx.Err())
			}
			return false, fmt.Errorf("%w: %s: %s: %v", ErrDownload, d.name(), f.name, err)
		}
		defer unlock()
		if isFile(filepath.Join(d.snap, f.name)) {
			return false, nil
		}
	}
	res, err := d.fetch(ctx, d.rev, d.pinned, f)
	if err != nil || res.missing {
		return res.missing, err
	}
	if !d.pinned {
		if res.commit != "" && !plainName(res.commit) { // it names the snapshot's directory and locks
			return false, fmt.Errorf("%w: %s: %s sent X-Repo-Commit %q, not a commit hash", ErrDownload, d.name(), d.endpoint, oneline.Clip(res.commit, 80))
		}
		if res.commit != "" {
			d.rev, d.pinned = res.commit, true
		}
		d.snap = filepath.Join(d.repo, "snapshots", d.rev)
	}
	if err := place(res.blob, d.snap, f.name); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrDownload, d.name(), err)
	}
	return false, nil
}

// fetchWeights downloads model.safetensors or, where the repository has none, the index of a
// sharded checkpoint and every shard it lists.
func (d *downloader) fetchWeights(ctx context.Context) error {
	if missing, err := d.fetchFile(ctx, repoFile{"model.safetensors", false, 0}); err != nil || !missing {
		return err
	}
	missing, err := d.fetchFile(ctx, repoFile{safetensors.IndexFile, false, maxIndex})
	switch {
	case err != nil:
		return err
	case missing:
		return fmt.Errorf("%w: %s at %s has no model.safetensors or %s (rosetop reads safetensors weights only)", ErrNotFound, d.name(), d.endpoint, safetensors.IndexFile)
	}
	idx, err := safetensors.ReadIndex(filepath.Join(d.snap, safetensors.IndexFile))
	if err != nil { // checked when it was downloaded: the cache was changed since
		return fmt.Errorf("%w: %s: %v", ErrDownload, d.name(), err)
	}
	for _, s := range idx.Shards() {
		if _, err := d.fetchFile(ctx, repoFile{s, true, 0}); err != nil {
			return err
		}
	}
	return nil
}

// fetch downloads one file at revision rev. A pinned revision downloads through a named
// .incomplete file that later attempts and later runs resume; an unpinned one through a
// temporary file that is removed on failure, since "main" may name different bytes next time.
func (d *downloader) fetch(ctx context.Context, rev string, pinned bool, f repoFile) (result, error) {
	blobs := filepath.Join(d.repo, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return result{}, fmt.Errorf("%w: %s: %v", ErrDownload, d.name(), err)
	}
	// The name is one path segment: an index may name a shard with '#', '?' or '%' in it.
	addr := d.endpoint + "/" + d.id + "/resolve/" + rev + "/" + url.PathEscape(f.name)
	part := ""
	if pinned {
		part = filepath.Join(blobs, rev+"."+f.name+".incomplete")
	}
	var err error
	for attempt := 0; attempt < d.o.Attempts; attempt++ {
		var res result
		var retry bool
		res, retry, err = d.get(ctx, addr, part, f)
		if err == nil || !retry || part == "" || ctx.Err() != nil {
			return res, err
		}
	}
	return result{}, err
}

// get makes one request for url, resuming part when it holds a prefix. retry reports whether
// another attempt may succeed (the transfer was cut, or the partial file had to be discarded).
func (d *downloader) get(ctx context.Context, url, part string, f repoFile) (res result, retry bool, err error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s: %s", ErrDownload, d.name(), f.name, fmt.Sprintf(format, args...))
	}
	var off int64
	if part != "" {
		if fi, err := os.Stat(part); err == nil {
			off = fi.Size()
		}
	}
	watch, stop := watchStall(ctx, d.o.StallTimeout)
	defer stop()
	req, err := http.NewRequestWithContext(watch.ctx, http.MethodGet, url, nil)
	if err != nil {
		return result{}, false, fail("%v", err)
	}
	req.Header.Set("User-Agent", "rosetop")
	if off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	var meta respMeta
	resp, err := d.client(&meta).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return result{}, false, fmt.Errorf("%s: download cancelled: %w", d.name(), ctx.Err())
		}
		why := errors.New(oneLine(err))
		if st := watch.stalled(); st != nil {
			why = st
		}
		if !d.contacted {
			return result{}, false, notCached("%s is not in the Hugging Face cache (%s%s) and cannot be downloaded from %s (%v): run once with network access to fill the cache, or %s",
				d.name(), d.repo, brokenLink(d.repo), d.endpoint, why, d.set.remedy)
		}
		return result{}, true, fmt.Errorf("%w: %s: %s: %w; %s", ErrDownload, d.name(), f.name, why, again(part, off))
	}
	defer resp.Body.Close()
	d.contacted = true
	meta.take(resp.Header)

	switch code := resp.StatusCode; {
	case code == http.StatusNotFound && !f.required:
		return result{missing: true}, false, nil
	case code == http.StatusNotFound:
		return result{}, false, fmt.Errorf("%w: %s not found at %s (HTTP 404 for %s)", ErrNotFound, d.name(), d.endpoint, f.name)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return result{}, false, fmt.Errorf("%w: %s at %s (HTTP %d): gated or private; set HF_TOKEN, or log in with `hf auth login`, as an account that may read it", ErrDenied, d.name(), d.endpoint, code)
	case code == http.StatusRequestedRangeNotSatisfiable && off > 0:
		os.Remove(part) // longer than the file: not a prefix of it
		return result{}, true, fail("server refused to resume at byte %d; restarting", off)
	case code == http.StatusOK:
		off = 0 // the server ignored the Range header: start over
	case code == http.StatusPartialContent && off > 0:
		if start, _, ok := parseContentRange(resp.Header.Get("Content-Range")); !ok || start != off {
			os.Remove(part)
			return result{}, true, fail("server resumed at the wrong offset (Content-Range %q, want start %d)", resp.Header.Get("Content-Range"), off)
		}
	default:
		return result{}, false, fail("HTTP %d from %s", code, d.endpoint)
	}
	total := meta.size
	if total < 0 && resp.StatusCode == http.StatusOK {
		total = resp.ContentLength // -1 when unknown
	}
	if total < 0 && resp.StatusCode == http.StatusPartialContent {
		_, total, _ = parseContentRange(resp.Header.Get("Content-Range"))
	}
	if total >= 0 && off > total {
		os.Remove(part)
		return result{}, true, fail("partial file of %d bytes is longer than the %d-byte file; restarting", off, total)
	}
	if f.maxBytes > 0 && total > f.maxBytes {
		return result{}, false, fmt.Errorf("%w: %s: %s: the server announces %d bytes, over the %d-byte limit for this file; %s", ErrBadFile, d.name(), f.name, total, f.maxBytes, d.notCached())
	}
	res, retry, saveErr := d.save(watch.body(resp.Body), part, off, total, f, meta)
	if saveErr != nil && ctx.Err() != nil && watch.stalled() == nil {
		// The caller's cancellation cut the body: say so, not that the transfer broke.
		return result{}, false, fmt.Errorf("%s: %s: download cancelled (%v): %w; run again to resume", d.name(), f.name, oneLine(saveErr), ctx.Err())
	}
	return res, retry, saveErr
}

// again tells how a failed transfer continues: a pinned file resumes from what it kept.
func again(part string, off int64) string {
	if part == "" {
		return "run again to retry"
	}
	return fmt.Sprintf("run again to resume from byte %d", off)
}

// notCached ends the message of a refused file: nothing entered the cache, and the endpoint may
// not be the hub at all (a proxy or captive portal answering with its own page).
// name is what the messages call the download: "model gpt2", "tokenizer gpt2".
func (d *downloader) name() string { return d.set.what + " " + d.id }

func (d *downloader) notCached() string {
	return fmt.Sprintf("nothing was cached (is %s the Hugging Face hub, or a proxy's page?)", d.endpoint)
}

// respMeta is the hub's metadata collected over a redirect chain: Hugging Face puts the commit
// and the real size and hash of large (LFS) files on its redirect to the storage backend.
type respMeta struct {
	commit string // X-Repo-Commit
	size   int64  // X-Linked-Size, -1 when absent
	etag   string // X-Linked-Etag, else ETag
	seen   bool   // take was called: size is initialised
}

// take records the headers of one response of the chain; the first value of each wins.
func (m *respMeta) take(h http.Header) {
	if !m.seen {
		m.seen, m.size = true, -1
	}
	if m.commit == "" {
		m.commit = h.Get("X-Repo-Commit")
	}
	if m.size < 0 {
		if n, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			m.size = n
		}
	}
	if m.etag == "" {
		m.etag = h.Get("X-Linked-Etag")
		if m.etag == "" {
			m.etag = h.Get("ETag")
		}
	}
}

// client is the caller's client with a redirect hook that records each redirect's headers.
func (d *downloader) client(m *respMeta) *http.Client {
	c := *d.o.HTTPClient
	prev := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.Response != nil {
			m.take(req.Response.Header)
		}
		if prev != nil {
			return prev(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// parseContentRange reads "bytes START-END/TOTAL"; total is -1 for "*".
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, -1, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, -1, false
	}
	first, _, found := strings.Cut(rng, "-")
	start, err := strconv.ParseInt(first, 10, 64)
	if !found || err != nil {
		return 0, -1, false
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return 0, -1, false
		}
	}
	return start, total, true
}

// oneLine keeps error messages on one line whatever the transport put in them.
func oneLine(err error) string { return oneline.Fold(err.Error()) }
