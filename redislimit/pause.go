package redislimit

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry/overload"
)

// The defaults of [PauseShareOptions].
const (
	DefaultPauseTimeout     = time.Second     // Timeout: a pause is rare, and worth the wait
	DefaultPauseBuffer      = 64              // Buffer
	DefaultPauseHealthCheck = 5 * time.Second // HealthCheck: a dead subscription is made again within 10s
)

// PauseShareOptions configures a [PauseShare]. Channel must be set.
type PauseShareOptions struct {
	// Channel names the Redis pub/sub channel on which the processes
	// share a downstream's pauses, and the key (a sorted set) that keeps
	// those in force for a process that starts later. The same in every
	// process; required; no '{' or '}' (a Redis Cluster hash tag).
	Channel string
	// Timeout bounds each round trip: publishing a pause, reading the
	// stored ones. At least 1 ms. Default: [DefaultPauseTimeout].
	Timeout time.Duration
	// Buffer is how many pauses may wait to be published; Publish drops
	// one more, and counts it. Default: [DefaultPauseBuffer].
	Buffer int
	// HealthCheck is how long the subscription may stay silent before
	// it is pinged; with no answer by the next, it is made again. At
	// least 1 ms. Default: [DefaultPauseHealthCheck].
	HealthCheck time.Duration
}

// PauseShare shares the pauses of an [overload.Pause] between processes
// through Redis: [PauseShare.Publish], as the Pause's OnPause, publishes
// the pauses this process learns; [PauseShare.Start] subscribes and sets
// those of the others with Pause.ExtendUntil. Build one with
// [NewPauseShare]; [PauseShare.Close] stops it. Hosts' clocks must agree
// to well within a pause, which travels as a time.
type PauseShare struct {
	client redis.UniversalClient
	o      PauseShareOptions
	id     string // tells this process's messages from the others'
	out    chan shared
	ready  chan struct{}

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	sub     *redis.PubSub // the current subscription, for Close to end it
	wg      sync.WaitGroup

	published, dropped, received, loaded, errors atomic.Uint64
}

// shared is a pause to publish.
type shared struct {
	partition string
	until     time.Time
}

// NewPauseShare returns a PauseShare on client (a *redis.Client,
// *redis.ClusterClient or *redis.Ring), without calling Redis or starting
// a goroutine. A nil client or an invalid option gives an error wrapping
// retry.ErrInvalidOption that names the problem.
func NewPauseShare(client redis.UniversalClient, opts *PauseShareOptions) (*PauseShare, error) {
	if err := checkClient(client); err != nil {
		return nil, err
	}
	if opts == nil {
		return nil, invalid("the pause share's options are nil: set at least Channel")
	}
	o := *opts
	if o.Timeout == 0 {
		o.Timeout = DefaultPauseTimeout
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultPauseBuffer
	}
	if o.HealthCheck == 0 {
		o.HealthCheck = DefaultPauseHealthCheck
	}
	switch {
	case o.Channel == "":
		return nil, invalid("the pause share's Channel is empty: name the downstream's channel, the same in every process")
	case strings.ContainsAny(o.Channel, "{}"):
		return nil, invalid("the pause share's Channel contains '{' or '}', a Redis Cluster hash tag")
	case o.Timeout < time.Millisecond:
		return nil, invalid("the pause share's Timeout %v is below 1ms: is it in the unit you meant?", o.Timeout)
	case o.Buffer < 0:
		return nil, invalid("the pause share's Buffer %d is negative", o.Buffer)
	case o.HealthCheck < time.Millisecond:
		return nil, invalid("the pause share's HealthCheck %v is below 1ms: is it in the unit you meant?", o.HealthCheck)
	}
	return &PauseShare{client: client, o: o, id: rand.Text(), out: make(chan shared, o.Buffer), ready: make(chan struct{})}, nil
}

// Publish shares with the other processes that partition is paused until
// until. Set it as overload.PauseOptions.OnPause: it never blocks, and
// drops the pause when Buffer pauses already wait. Pauses published
// before Start wait for it.
func (s *PauseShare) Publish(partition string, until time.Time) {
	select {
	case s.out <- shared{partition, until}:
	default:
		s.dropped.Add(1)
	}
}

// Start subscribes to Channel and sets on p the pauses of the other
// processes, those stored included, and publishes this process's, until
// Close. It returns at once; Ready says when the subscription is made.
// Redis trouble is retried, never returned: the error is for a nil p, a
// second Start, or one after Close.
func (s *PauseShare) Start(p *overload.Pause) error {
	if p == nil {
		return invalid("the pause to share is nil")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("redislimit: PauseShare.Start after Close")
	case s.started:
		return errors.New("redislimit: PauseShare.Start called twice")
	}
	s.started = true
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Go(func() { s.send(ctx) })
	s.wg.Go(func() { s.subscribe(ctx, p) })
	return nil
}

// Ready is closed once Start's first subscription is made and the stored
// pauses are set: from then on, a pause that another process publishes
// reaches this one.
func (s *PauseShare) Ready() <-chan struct{} { return s.ready }

// Close stops the PauseShare and waits for its goroutines; pauses not
// yet published are dropped. It may be called more than once.
func (s *PauseShare) Close() error {
	s.mu.Lock()
	s.closed = true
	cancel, sub := s.cancel, s.sub
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if sub != nil {
		_ = sub.Close() // ends a Receive that the context cannot
	}
	s.wg.Wait()
	return nil
}

// send publishes the pauses that Publish hands it, one at a time.
func (s *PauseShare) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.out:
			if err := s.publish(ctx, m); err != nil {
				s.errors.Add(1)
			} else {
				s.published.Add(1)
			}
		}
	}
}

// publish stores the pause, keeping the later end of a partition's, and
// the key's expiry at its latest pause, then publishes it: one round
// trip, a pipeline.
func (s *PauseShare) publish(ctx context.Context, m shared) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	until := m.until.UnixMilli()
	key := s.o.Channel
	_, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZAddGT(ctx, key, redis.Z{Score: float64(until), Member: m.partition})
		pipe.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(time.Now().UnixMilli(), 10))
		pipe.Do(ctx, "PEXPIREAT", key, until, "NX") // a new key has no expiry, which GT takes as infinite
		pipe.Do(ctx, "PEXPIREAT", key, until, "GT")
		pipe.Publish(ctx, s.o.Channel, encodePause(s.id, until, m.partition))
		return nil
	})
	return err
}

// subscribe keeps a subscription to Channel until ctx ends, making it
// again, after a pause, whenever it fails.
func (s *PauseShare) subscribe(ctx context.Context, p *overload.Pause) {
	const minWait, maxWait = 10 * time.Millisecond, time.Second
	wait := minWait
	for {
		sub := s.client.Subscribe(ctx, s.o.Channel)
		if !s.setSub(sub) {
			_ = sub.Close()
			return
		}
		if s.listen(ctx, sub, p) {
			wait = minWait
		}
		_ = sub.Close()
		if ctx.Err() != nil {
			return
		}
		s.errors.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxWait)
	}
}

// setSub records sub for Close, or reports false once Close has begun.
func (s *PauseShare) setSub(sub *redis.PubSub) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sub = sub
	return !s.closed
}

// listen sets the pauses that sub receives on p until it fails, and
// reports whether it was made.
func (s *PauseShare) listen(ctx context.Context, sub *redis.PubSub, p *overload.Pause) (made bool) {
	pinged := false
	for {
		msg, err := sub.ReceiveTimeout(ctx, s.o.HealthCheck)
		if err != nil {
			var nerr net.Error
			if !pinged && errors.As(err, &nerr) && nerr.Timeout() && ctx.Err() == nil {
				pinged = true
				if sub.Ping(ctx) == nil {
					continue
				}
			}
			return made
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if !s.load(ctx, p) {
					return made
				}
				made = true
				s.markReady()
			}
		case *redis.Message:
			id, until, partition, ok := decodePause(m.Payload)
			switch {
			case !ok:
				s.errors.Add(1)
			case id != s.id:
				s.received.Add(1)
				p.ExtendUntil(partition, time.UnixMilli(until))
			}
		}
	}
}

// load sets on p the pauses stored in Redis that are still in force.
func (s *PauseShare) load(ctx context.Context, p *overload.Pause) bool {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	pauses, err := s.client.ZRangeByScoreWithScores(ctx, s.o.Channel, &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(time.Now().UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return false
	}
	for _, z := range pauses {
		partition, ok := z.Member.(string)
		if ok {
			s.loaded.Add(1)
			p.ExtendUntil(partition, time.UnixMilli(int64(z.Score)))
		}
	}
	return true
}

func (s *PauseShare) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

// A pause travels as "p1 <sender's id> <end, Unix ms> <partition>"; the
// partition goes last, so it may hold any byte.
const pauseVersion = "p1 "

func encodePause(id string, until int64, partition string) string {
	return pauseVersion + id + " " + strconv.FormatInt(until, 10) + " " + partition
}

func decodePause(msg string) (id string, until int64, partition string, ok bool) {
	rest, ok := strings.CutPrefix(msg, pauseVersion)
	if !ok {
		return "", 0, "", false
	}
	id, rest, ok1 := strings.Cut(rest, " ")
	ms, partition, ok2 := strings.Cut(rest, " ")
	until, err := strconv.ParseInt(ms, 10, 64)
	if !ok1 || !ok2 || err != nil || id == "" {
		return "", 0, "", false
	}
	return id, until, partition, true
}

// PauseStats counts what a [PauseShare] did since it was built.
type PauseStats struct {
	Published uint64 // pauses of this process stored and published
	Dropped   uint64 // pauses that Publish dropped: Buffer already waited
	Received  uint64 // pauses of other processes received and set
	Loaded    uint64 // stored pauses set when a subscription was made
	Errors    uint64 // failed round trips, lost subscriptions, malformed messages
}

// Stats returns the counts so far.
func (s *PauseShare) Stats() PauseStats {
	return PauseStats{
		Published: s.published.Load(), Dropped: s.dropped.Load(), Received: s.received.Load(),
		Loaded: s.loaded.Load(), Errors: s.errors.Load(),
	}
}
