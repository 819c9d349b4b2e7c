package clocks

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

func TestTimer_oneTimerResetForEachWait(t *testing.T) {
	mock := clock.NewMock()
	var w Timer
	ch := w.Arm(mock, time.Second)
	first := w.p
	mock.Add(time.Second)
	select {
	case <-ch:
	default:
		t.Fatal("the timer did not fire after its wait")
	}
	ch = w.Arm(mock, time.Minute)
	if w.p != first {
		t.Fatal("a second wait made a second timer")
	}
	w.Stop(mock)
	mock.Add(time.Minute)
	select {
	case <-ch:
		t.Fatal("a stopped timer fired")
	default:
	}
}

func TestFuncTimer_callsOnceUnlessStopped(t *testing.T) {
	mock := clock.NewMock()
	fired := make(chan struct{}, 2)
	ft := AfterFunc(mock, time.Second, func() { fired <- struct{}{} })
	mock.Add(time.Second)
	<-fired
	ft.Reset(time.Second)
	if !ft.Stop() {
		t.Fatal("Stop of an armed timer reported it fired")
	}
	mock.Add(time.Second)
	if len(fired) != 0 {
		t.Fatal("a stopped timer called its function")
	}
	if (FuncTimer{}).Stop() {
		t.Fatal("the zero FuncTimer stopped something")
	}
}
