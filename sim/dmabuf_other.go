//go:build !linux

package sim

import "errors"

var errNoDmaBuf = errors.New("dma-buf descriptors are Linux only")

func newDmaBufFD(DmaBuf) (int, error) { return -1, errNoDmaBuf }

func describeDmaBuf(int) (DmaBuf, error) { return DmaBuf{}, errNoDmaBuf }
