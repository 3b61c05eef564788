package wsync_test

import (
	"fmt"
	"strconv"
	"testing"

	"wsync.dev/wsync"
)

// testModel has what a real model has: a tensor larger than a bucket (split), mixed dtypes, a
// scalar, an empty tensor, an odd byte length, and enough tensors for several batches.
func testModel() []tensorSpec {
	m := []tensorSpec{
		{"embed.weight", wsync.DtypeBfloat16, []int64{300, 64}}, // 38400 bytes: over two 16 KiB buckets
		{"scalar.step", wsync.DtypeInt64, nil},
		{"rotary.unused", wsync.DtypeFloat32, []int64{0, 8}},
		{"mask", wsync.DtypeBool, []int64{7}},
		{"fp8.scale", wsync.DtypeFloat8E4M3, []int64{3, 5}},
		{"deep", wsync.DtypeInt16, []int64{2, 1, 2, 1, 2, 1, 2, 3}}, // 8 dimensions
	}
	for l := 0; l < 6; l++ {
		p := "layers." + strconv.Itoa(l) + "."
		m = append(m,
			tensorSpec{p + "norm.weight", wsync.DtypeFloat32, []int64{64}},
			tensorSpec{p + "attn.weight", wsync.DtypeBfloat16, []int64{64, 48}},
			tensorSpec{p + "mlp.weight", wsync.DtypeFloat16, []int64{96, 64}},
			tensorSpec{p + "mlp.bias", wsync.DtypeFloat64, []int64{96}})
	}
	return m
}

func tensorsOf(m []tensorSpec) []wsync.Tensor {
	ts := make([]wsync.Tensor, len(m))
	for i, s := range m {
		ts[i] = wsync.Tensor{Name: s.name, Dtype: s.dtype, Shape: s.shape}
		if n := s.nbytes(); n > 0 {
			ts[i].Data = wsync.NewBuffer(n)
		}
	}
	return ts
}

// modelReceiver checks every tensor of every version against its checksum and commits. With
// register, it registers Buffers for every other tensor, so those arrive placed.
func modelReceiver(m []tensorSpec, versions uint64, register bool) func(r *wsync.Receiver) error {
	return func(r *wsync.Receiver) error {
		byName := map[string]tensorSpec{}
		for _, s := range m {
			byName[s.name] = s
		}
		regs := map[string]*wsync.Buffer{}
		if register {
			var ts []wsync.Tensor
			for i, t := range tensorsOf(m) {
				if i%2 == 0 {
					ts = append(ts, t)
					regs[t.Name] = t.Data
				}
			}
			if err := r.Register(ts); err != nil {
				return fmt.Errorf("Register: %w", err)
			}
		}
		got := map[string]uint64{}
		var stale *wsync.ReceivedTensor // a view of the previous event: must expire at Next
		placedSeen := 0
		for {
			ev, err := r.Next(testTimeout)
			if err != nil {
				return fmt.Errorf("Next: %w", err)
			}
			if stale != nil && stale.Bytes() != nil {
				return fmt.Errorf("the view of '%s' is still readable after the next Next", stale.Name)
			}
			stale = nil
			switch ev.Kind {
			case wsync.EventBucket:
				for i := range ev.Tensors {
					t := &ev.Tensors[i]
					s, ok := byName[t.Name]
					if !ok {
						return fmt.Errorf("unknown tensor '%s' arrived", t.Name)
					}
					if _, dup := got[t.Name]; dup {
						return fmt.Errorf("tensor '%s' arrived twice in one update", t.Name)
					}
					if t.Dtype != s.dtype || fmt.Sprint(t.Shape) != fmt.Sprint(append([]int64{}, s.shape...)) ||
						t.NumBytes != uint64(s.nbytes()) {
						return fmt.Errorf("tensor '%s' arrived as %s %v (%d bytes), sent as %s %v", t.Name, t.Dtype, t.Shape,
							t.NumBytes, s.dtype, s.shape)
					}
					if reg := regs[t.Name]; reg != nil != t.Placed && s.nbytes() > 0 {
						return fmt.Errorf("tensor '%s': placed=%v but registered=%v", t.Name, t.Placed, reg != nil)
					}
					if t.Placed {
						placedSeen++
						if s.nbytes() > 0 && (t.Buffer != regs[t.Name] || len(t.Bytes()) != s.nbytes()) {
							return fmt.Errorf("placed tensor '%s' is not its registered Buffer", t.Name)
						}
						got[t.Name] = 0 // checked at the commit, in the Buffer
						continue
					}
					got[t.Name] = checksum(t.Bytes())
					if len(t.Bytes()) > 0 {
						stale = t
					}
				}
			case wsync.EventCommit:
				for _, s := range m {
					have, ok := got[s.name]
					if !ok {
						return fmt.Errorf("version %d: tensor '%s' never arrived", ev.Version, s.name)
					}
					if reg := regs[s.name]; reg != nil {
						have = checksum(reg.Bytes())
					}
					if have != expected(s, ev.Version) {
						return fmt.Errorf("version %d: tensor '%s' differs from what was sent", ev.Version, s.name)
					}
				}
				if len(got) != len(m) {
					return fmt.Errorf("version %d: %d tensors arrived, %d sent", ev.Version, len(got), len(m))
				}
				if err := r.Commit(ev.Version); err != nil {
					return fmt.Errorf("Commit: %w", err)
				}
				if r.CommittedVersion() != ev.Version {
					return fmt.Errorf("CommittedVersion() = %d after Commit(%d)", r.CommittedVersion(), ev.Version)
				}
				got = map[string]uint64{}
			case wsync.EventClosed:
				if r.CommittedVersion() != versions {
					return fmt.Errorf("closed at version %d, want %d", r.CommittedVersion(), versions)
				}
				if register && placedSeen == 0 {
					return fmt.Errorf("no tensor arrived placed into a registered Buffer")
				}
				return nil
			default:
				return fmt.Errorf("unexpected event %s", ev.Kind)
			}
		}
	}
}

// Two receivers (one registered, one taking views) get three versions, sent with SendStart and
// Wait, SendBatch, and SendStart then Finalize; every byte is checked.
func TestBytesArriveEqualAndVersionsCommit(t *testing.T) {
	m := testModel()
	h := newHarness(t)
	r1 := h.startReceiver(1, "gotest", modelReceiver(m, 3, true))
	r2 := h.startReceiver(2, "gotest", modelReceiver(m, 3, false))
	g := h.newGroup(2, wsync.Option{Key: "bucket_bytes", Value: "16384"}, wsync.Option{Key: "verify_payload", Value: "1"})

	ts := tensorsOf(m)
	const batch = 5
	batches, total := 0, 0
	for _, s := range m {
		total += s.nbytes()
	}
	for v := uint64(1); v <= 3; v++ {
		for i := range ts {
			fill(ts[i].Name, v, ts[i].Data.Bytes()) // nil Data (empty tensor): nothing to fill
		}
		var sends []*wsync.Send
		for off := 0; off < len(ts); off += batch {
			end := off + batch
			if end > len(ts) {
				end = len(ts)
			}
			batches++
			if v == 2 {
				if err := g.SendBatch(ts[off:end], testTimeout); err != nil {
					h.fatalf("version %d: SendBatch: %v", v, err)
				}
				continue
			}
			s, err := g.SendStart(ts[off:end], testTimeout) // waits for room when 2 are in flight
			if err != nil {
				h.fatalf("version %d: SendStart: %v", v, err)
			}
			if len(sends) > 0 && s.Ticket() != sends[len(sends)-1].Ticket()+1 {
				h.fatalf("tickets %d then %d", sends[len(sends)-1].Ticket(), s.Ticket())
			}
			sends = append(sends, s)
		}
		if v == 1 { // wait for the last batch: every earlier one is then delivered too
			last := sends[len(sends)-1]
			if done, err := last.Wait(testTimeout); !done || err != nil {
				h.fatalf("Wait: %v %v", done, err)
			}
			for _, s := range sends {
				if done, err := s.Done(); !done || err != nil {
					h.fatalf("batch %d: Done() = %v, %v after a later batch was delivered", s.Ticket(), done, err)
				}
			}
		}
		// Version 3 finalizes with its batches possibly in flight: Finalize delivers them first.
		if err := g.Finalize(v, testTimeout); err != nil {
			h.fatalf("Finalize(%d): %v", v, err)
		}
		st, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.CommittedVersion != v || st.Updates != v {
			h.fatalf("after Finalize(%d): Stats %+v", v, st)
		}
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.NumReceivers != 2 || st.Batches != uint64(batches) || st.Tensors != uint64(3*len(m)) ||
		st.Bytes != uint64(3*total) || st.Buckets < 3*3 || st.StagingBytes == 0 {
		h.fatalf("Stats %+v; want 2 receivers, %d batches, %d tensors, %d bytes", st, batches, 3*len(m), 3*total)
	}
	if err := g.Finalize(3, testTimeout); err == nil {
		t.Fatal("Finalize(3) again: a version must be greater than the last committed one")
	}
	g.Close()
	g.Close() // idempotent
	if err := g.SendBatch(ts, 0); err == nil {
		t.Fatal("SendBatch after Close succeeded")
	} else {
		wantError(t, err, wsync.StatusInvalidState, "closed")
	}
	for i, ch := range []<-chan error{r1, r2} {
		if err := await(t, ch, "receiver"); err != nil {
			t.Errorf("receiver %d: %v", i+1, err)
		}
	}
}
