package cuda

import "unsafe"

// Stream is a CUstream. The zero value is the legacy default stream.
type Stream struct{ h uintptr }

// NewStream creates a stream. It synchronizes with the default stream like
// any blocking stream, so mixing it with default-stream copies is safe.
func NewStream() (Stream, error) {
	var h uintptr
	if err := ctxCall(fStreamCreate, uintptr(unsafe.Pointer(&h)), 0); err != nil {
		return Stream{}, err
	}
	return Stream{h}, nil
}

// Handle returns the raw CUstream.
func (s Stream) Handle() uintptr { return s.h }

// Synchronize waits for all work queued on s.
func (s Stream) Synchronize() error { return ctxCall(fStreamSynchronize, s.h) }

// Destroy destroys the stream. Destroying the default stream is a no-op.
func (s Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	return ctxCall(fStreamDestroy, s.h)
}

// Event is a CUevent, used for timing and ordering.
type Event struct{ h uintptr }

// NewEvent creates an event with timing enabled.
func NewEvent() (Event, error) {
	var h uintptr
	if err := ctxCall(fEventCreate, uintptr(unsafe.Pointer(&h)), 0); err != nil {
		return Event{}, err
	}
	return Event{h}, nil
}

// Record queues the event on s.
func (e Event) Record(s Stream) error { return ctxCall(fEventRecord, e.h, s.h) }

// Synchronize waits until the event has completed.
func (e Event) Synchronize() error { return ctxCall(fEventSynchronize, e.h) }

// Destroy destroys the event.
func (e Event) Destroy() error {
	if e.h == 0 {
		return nil
	}
	return ctxCall(fEventDestroy, e.h)
}

// ElapsedMs returns the time in milliseconds between two recorded,
// completed events (resolution about 0.5 µs).
func ElapsedMs(start, end Event) (float32, error) {
	var ms float32
	if err := ctxCall(fEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, end.h); err != nil {
		return 0, err
	}
	return ms, nil
}
