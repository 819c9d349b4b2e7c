package retrygobreaker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sony/gobreaker/v2"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrygobreaker"
)

// BenchmarkTwoStepAllow is gobreaker's own gate, for comparison: Allow
// and done, on a closed breaker.
func BenchmarkTwoStepAllow(b *testing.B) {
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{})
	b.ReportAllocs()
	for b.Loop() {
		done, err := cb.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

// BenchmarkAllow is the adapter's Allow and done on a closed breaker.
func BenchmarkAllow(b *testing.B) {
	br, err := retrygobreaker.NewBreaker(gobreaker.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

// BenchmarkAllowOpen is a refused attempt: the refusal is made once per
// Breaker, so it costs no allocation.
func BenchmarkAllowOpen(b *testing.B) {
	br, err := retrygobreaker.NewBreaker(gobreaker.Settings{ReadyToTrip: func(gobreaker.Counts) bool { return true }})
	if err != nil {
		b.Fatal(err)
	}
	done, err := br.Allow()
	if err != nil {
		b.Fatal(err)
	}
	done(errors.New("down")) // trips it for the default Timeout, 60s
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("allowed")
		}
	}
}

// BenchmarkDo is a first-try success through a prebuilt Retrier with
// the breaker.
func BenchmarkDo(b *testing.B) {
	br, err := retrygobreaker.NewBreaker(gobreaker.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: br}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Do(ctx, fn)
	}
}

// BenchmarkDoOpen is a call refused before its first attempt.
func BenchmarkDoOpen(b *testing.B) {
	br, err := retrygobreaker.NewBreaker(gobreaker.Settings{ReadyToTrip: func(gobreaker.Counts) bool { return true }})
	if err != nil {
		b.Fatal(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: br}), retry.WithMaxAttempts(1))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	errDown := errors.New("down")
	_ = r.Do(ctx, func(context.Context) error { return errDown }) // trips it
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if r.Do(ctx, fn) == nil {
			b.Fatal("allowed")
		}
	}
}
