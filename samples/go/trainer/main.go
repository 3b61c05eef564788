// Command trainer is the Go sample trainer: it publishes the synthetic ~1 GiB model of
// samples/common to N engines as weight versions 1..V, each with different contents, in batches
// of 64 tensors, as samples/trainer (C) does, with the same flags and output. It uses the
// asynchronous send: while one batch moves, the next is produced (filled) into its Buffers.
//
//	trainer --receivers 2 [--store 127.0.0.1:0] [--store-file PATH] [--versions 3]
//	        [--bucket-mib 256] [--transport ucx] [--tls sm|tcp|...] [--timeout-ms 60000]
//	        [--scale 1.0]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"wsync.dev/wsync"
)

// batch is the number of tensors per SendStart, as in the C trainer.
const batch = 64

func main() { os.Exit(run()) }

// die prints a failed call as the C trainer does: "trainer: CALL failed: STATUS: message".
func die(err error) int {
	var e *wsync.Error
	if errors.As(err, &e) {
		fmt.Fprintf(os.Stderr, "trainer: %s failed: %s: %s\n", e.Op, e.Status.Name(), e.Message)
	} else {
		fmt.Fprintf(os.Stderr, "trainer: %v\n", err)
	}
	return 1
}

func run() int {
	receivers := flag.Uint("receivers", 2, "engines expected to join")
	versions := flag.Uint64("versions", 3, "weight versions to publish")
	store := flag.String("store", "127.0.0.1:0", "host:port of the rendezvous store (port 0: a free one)")
	storeFile := flag.String("store-file", "", "file the store's host:port is written to")
	transport := flag.String("transport", "ucx", "transport plugin")
	tls := flag.String("tls", "", "UCX transports (option transport.tls), announced to the engines too")
	bucketMiB := flag.Uint64("bucket-mib", 256, "bucket size in MiB")
	timeoutMS := flag.String("timeout-ms", "60000", "timeout of blocking calls, in milliseconds")
	scale := flag.Float64("scale", 1.0, "shrinks every dimension of the model (for tests)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "trainer: unknown argument %s\n", flag.Arg(0))
		return 2
	}

	m := newModel(*scale)
	var total uint64
	data := make([]*wsync.Buffer, m.len())
	tensors := make([]wsync.Tensor, m.len())
	for i := range data {
		if n := m.nbytes(i); n > 0 {
			data[i] = wsync.NewBuffer(n)
		}
		tensors[i] = m.tensor(i, data[i])
		total += uint64(m.nbytes(i))
	}
	defer func() {
		for _, b := range data {
			b.Free()
		}
	}()

	opts := []wsync.Option{
		{Key: "bucket_bytes", Value: strconv.FormatUint(*bucketMiB<<20, 10)},
		{Key: "timeout_ms", Value: *timeoutMS},
	}
	if *storeFile != "" {
		opts = append(opts, wsync.Option{Key: "store_addr_file", Value: *storeFile})
	}
	if *tls != "" {
		opts = append(opts, wsync.Option{Key: "transport.tls", Value: *tls})
	}
	fmt.Printf("trainer: model of %d tensors, %.2f GB; waiting for %d engine(s)\n", m.len(), float64(total)/1e9, *receivers)
	g, err := wsync.NewGroup(wsync.GroupConfig{NumReceivers: int(*receivers), GroupName: "demo", StoreAddr: *store,
		Transport: *transport, Adapter: "native", Options: opts})
	if err != nil {
		return die(err)
	}
	defer g.Close()
	fmt.Printf("trainer: group 'demo' up, store at %s\n", g.StoreAddr())

	for v := uint64(1); v <= *versions; v++ {
		t0 := time.Now()
		var last *wsync.Send
		for off := 0; off < len(tensors); off += batch {
			end := off + batch
			if end > len(tensors) {
				end = len(tensors)
			}
			// Produce this batch while the previous one moves. Its Buffers were last sent in
			// version v-1, whose Finalize returned: wsync no longer reads them.
			for i := off; i < end; i++ {
				m.fill(i, v, data[i])
			}
			// At most two batches are in flight (option staging_buckets): a third start first
			// waits for the oldest. The default timeout is the option timeout_ms.
			if last, err = g.SendStart(tensors[off:end], wsync.DefaultTimeout); err != nil {
				return die(err)
			}
		}
		// Every batch delivered (the last one finishes after the others)...
		for done := false; !done; {
			if done, err = last.Wait(wsync.DefaultTimeout); err != nil {
				return die(err)
			}
		}
		// ...then every engine commits version v.
		if err := g.Finalize(v, wsync.DefaultTimeout); err != nil {
			return die(err)
		}
		dt := time.Since(t0).Seconds()
		fmt.Printf("trainer: version %d committed on %d engine(s): %d tensors, %.2f GB in %.2f s (%.2f GB/s per engine)\n",
			v, *receivers, m.len(), float64(total)/1e9, dt, float64(total)/1e9/dt)
	}
	s, err := g.Stats()
	if err != nil {
		return die(err)
	}
	fmt.Printf("trainer: done: %d updates, %d buckets, staging %.0f MiB\n", s.Updates, s.Buckets,
		float64(s.StagingBytes)/1048576.0)
	return 0
}
