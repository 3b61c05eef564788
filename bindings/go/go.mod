module wsync.dev/wsync

go 1.19
