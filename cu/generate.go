package cu

//go:generate go run ../internal/cmd/mkcu -header /usr/local/cuda/include/cuda.h -out .
