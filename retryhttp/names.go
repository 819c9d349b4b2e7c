package retryhttp

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/steadfast-go/retry"
)

// maxNames bounds the prepared Retriers a Transport keeps, one per
// operation name, so that hosts or names without end cannot grow it.
const maxNames = 256

// nameKey identifies an operation: method and host for the default name,
// or the name returned by Options.OperationName (method and host empty).
type nameKey struct {
	method, host, name string
}

// names maps operation names to Retriers that carry them. Reads are one
// atomic load and a map lookup with no lock; a new name copies the map,
// which happens at most maxNames times.
type names struct {
	base *retry.Retrier
	m    atomic.Pointer[map[nameKey]*retry.Retrier]
	mu   sync.Mutex // serializes writers of m
}

// retrier returns the Retrier for req, named as the Transport says: by
// Options.OperationName, else by the Retrier's own WithName, else "METHOD
// host".
func (t *Transport) retrier(req *http.Request) (*retry.Retrier, error) {
	var k nameKey
	switch {
	case t.name != nil:
		k = nameKey{name: t.name(req)}
	case t.named:
		return t.names.base, nil
	default:
		k = nameKey{method: methodOf(req), host: req.URL.Host}
	}
	if m := t.names.m.Load(); m != nil {
		if r, ok := (*m)[k]; ok {
			return r, nil
		}
	}
	return t.names.add(k)
}

// add prepares the Retrier for k and keeps it while there is room.
func (n *names) add(k nameKey) (*retry.Retrier, error) {
	name := k.name
	if k.method != "" || k.host != "" {
		name = k.method + " " + k.host
	}
	r, err := n.base.With(retry.WithName(name))
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.m.Load()
	if old != nil {
		if prev, ok := (*old)[k]; ok {
			return prev, nil
		}
		if len(*old) >= maxNames {
			return r, nil
		}
	}
	m := make(map[nameKey]*retry.Retrier, 1+lenOf(old))
	if old != nil {
		for key, v := range *old {
			m[key] = v
		}
	}
	m[k] = r
	n.m.Store(&m)
	return r, nil
}

func lenOf(m *map[nameKey]*retry.Retrier) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
