package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retryhttp"
)

// A redirect that http.Client follows carries the same Idempotency-Key; it
// is another request (another path), so the store must not replay the
// redirect's status for it.
func TestRedirectWithStoreIsSent(t *testing.T) {
	for _, tc := range []struct {
		method string
		code   int
	}{{http.MethodPost, http.StatusTemporaryRedirect}, {http.MethodGet, http.StatusFound}} {
		t.Run(tc.method, func(t *testing.T) {
			var (
				mu    sync.Mutex
				paths []string
			)
			seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
			e := newEnv(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.RequestURI())
				mu.Unlock()
				if r.URL.Path == "/old" {
					http.Redirect(w, r, "/new?id=7", tc.code)
					return
				}
				io.WriteString(w, "created")
			})
			store := &claimLog{IdempotencyStore: memstore.New(nil)}
			r, err := retry.New(retry.WithIdempotency(store, nil), retry.WithBackoff(retry.Constant(0)))
			require.NoError(t, err)
			c := e.client(r, nil)

			req := newRequest(t, context.Background(), tc.method, e.srv.URL+"/old?id=7", strings.NewReader("pay"))
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-42")
			resp, body, err := do(t, c, req)
			require.NoError(t, err, "the redirected request is sent, not replayed")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "created", body)
			assert.Equal(t, []string{"/old?id=7", "/new?id=7"}, seen())

			store.mu.Lock()
			keys := append([]string(nil), store.keys...)
			store.mu.Unlock()
			require.Len(t, keys, 2)
			assert.NotEqual(t, keys[0], keys[1], "each target has its own store key")
			for _, k := range keys {
				assert.NotContains(t, k, "old", "the path stays out of the store key")
				assert.NotContains(t, k, "new")
				assert.NotContains(t, k, "id=7")
			}

			// The same request again is the same request: replayed.
			req = newRequest(t, context.Background(), tc.method, e.srv.URL+"/old?id=7", strings.NewReader("pay"))
			req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-42")
			_, _, err = do(t, c, req)
			require.ErrorIs(t, err, retry.ErrReplayed)
			assert.Len(t, seen(), 2, "not sent again")
		})
	}
}
