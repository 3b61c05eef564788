package wsync

// BufferAllocated reports whether b still holds its C memory (for the tests of borrows).
func BufferAllocated(b *Buffer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.p != nil
}
