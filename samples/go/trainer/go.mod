module wsync.dev/samples/trainer

go 1.19

require wsync.dev/wsync v0.0.0

replace wsync.dev/wsync => ../../../bindings/go
