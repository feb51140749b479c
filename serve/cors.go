package serve

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// cors answers browsers' cross-origin requests as vLLM's server does (Starlette's CORS
// middleware with vLLM's defaults: every method and header, no credentials): a page from an
// allowed origin may call the API and read the reply; a preflight from another origin gets 400.
// Immutable after newCORS.
type cors struct {
	all     bool            // "*": any origin
	origins map[string]bool // else these, as browsers send Origin (scheme://host[:port])
}

// corsMaxAge is how long a browser may keep a preflight's answer, in seconds (Starlette's).
const corsMaxAge = "600"

// newCORS checks origins: "*", or origins of the form a browser sends. None: nil (no CORS).
func newCORS(origins []string) (*cors, error) {
	if len(origins) == 0 {
		return nil, nil
	}
	c := &cors{origins: map[string]bool{}}
	for _, o := range origins {
		canon, err := CheckOrigin(o)
		if err != nil {
			return nil, err
		}
		if canon == "*" {
			c.all = true
		}
		c.origins[canon] = true
	}
	return c, nil
}

// CheckOrigin checks an allowed origin: "*", or scheme://host[:port] as a browser sends it in
// Origin (a trailing slash is dropped). It returns the origin as compared with Origin.
func CheckOrigin(o string) (string, error) {
	if o == "*" {
		return o, nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return "", fmt.Errorf("%w: allowed origin %q: want * or scheme://host[:port], e.g. http://localhost:3000", ErrBadOptions, o)
	}
	return strings.TrimSuffix(o, "/"), nil
}

// allows reports whether a page from origin may call the API.
func (c *cors) allows(origin string) bool { return c.all || c.origins[origin] }

// preflight answers r if it is a CORS preflight (OPTIONS with Origin and
// Access-Control-Request-Method) and reports whether it did. A nil cors answers none.
func (c *cors) preflight(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if c == nil || r.Method != http.MethodOptions || origin == "" || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if !c.allows(origin) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "Disallowed CORS origin")
		return true
	}
	c.allowOrigin(h, r)
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS, POST")
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		h.Set("Access-Control-Allow-Headers", req) // every header is allowed: the ones asked for
	}
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "OK")
	return true
}

// annotate lets the page that sent r (from an allowed origin) read the reply; a nil cors none.
func (c *cors) annotate(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); c != nil && origin != "" && c.allows(origin) {
		c.allowOrigin(w.Header(), r)
	}
}

// allowOrigin names the origin a reply is for: "*" for any, unless the request carries cookies
// (a browser refuses "*" then) or only some origins are allowed, when it is the request's own
// and the reply varies with it.
func (c *cors) allowOrigin(h http.Header, r *http.Request) {
	if c.all && r.Header.Get("Cookie") == "" {
		h.Set("Access-Control-Allow-Origin", "*")
		return
	}
	h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
	h.Add("Vary", "Origin")
}
