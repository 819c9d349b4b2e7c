package overload

import (
	"context"
	"hash/maphash"
	"sync"
)

type partitionKey struct{}

// WithPartition returns ctx carrying key, the partition of the downstream
// (a tenant, a host, an API key) that a call made with it belongs to: a
// [Pause] or a [Rate] built with Partitioned keeps one state per key.
// The key is never written in an error or a log.
func WithPartition(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, partitionKey{}, key)
}

// PartitionOf returns the partition ctx carries, or "": the downstream as
// a whole.
func PartitionOf(ctx context.Context) string {
	k, _ := ctx.Value(partitionKey{}).(string)
	return k
}

// DefaultMaxPartitions is how many partitions a [Pause] or a [Rate] keeps
// state for at once, unless its options say otherwise.
const DefaultMaxPartitions = 1 << 16

// partitions keeps a state of type V per partition, for any number of
// them in bounded memory. A state that is idle (equal to a new one's, so
// dropping it changes no decision) is dropped by a sweep of its shard,
// which runs when the shard has doubled since its last sweep: the cost is
// amortised O(1) per new partition, and a shard holds at most twice its
// live partitions, or minSweep, and never more than its share of the cap.
type partitions[V any] struct {
	seed     maphash.Seed
	perShard int
	shards   [partitionShards]partitionShard[V]
}

const (
	partitionShards = 64
	minSweep        = 16
)

type partitionShard[V any] struct {
	mu    sync.Mutex
	m     map[string]V
	swept int // len(m) after the last sweep
	_     [40]byte
}

func (p *partitions[V]) init(limit int) {
	p.seed = maphash.MakeSeed()
	p.perShard = max(1, limit/partitionShards)
}

// shard returns the shard of key, locked.
func (p *partitions[V]) shard(key string) *partitionShard[V] {
	s := &p.shards[maphash.String(p.seed, key)%partitionShards]
	s.mu.Lock()
	return s
}

// put stores v for key in s, locked; a new key may first sweep out the
// idle states. It reports false, storing nothing, when s is full of live
// ones.
func (s *partitionShard[V]) put(key string, v V, perShard int, idle func(V) bool) bool {
	if _, ok := s.m[key]; !ok {
		if s.m == nil {
			s.m = make(map[string]V)
		}
		if len(s.m) >= max(2*s.swept, minSweep) || len(s.m) >= perShard {
			for k, old := range s.m {
				if idle(old) {
					delete(s.m, k)
				}
			}
			s.swept = len(s.m)
		}
		if len(s.m) >= perShard {
			return false
		}
	}
	s.m[key] = v
	return true
}

// size is how many partitions hold a state, idle ones not yet swept
// included.
func (p *partitions[V]) size() int {
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
