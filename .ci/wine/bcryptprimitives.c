// bcryptprimitives.dll for wine 8 (Debian 12), which has none: Go programs since Go 1.24 take
// their random bytes from its ProcessPrng and refuse to start without it. This one draws them
// from advapi32's RtlGenRandom (SystemFunction036), which wine has.
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

// ProcessPrng fills data with len random bytes. RtlGenRandom takes a ULONG length, so larger
// requests go in pieces.
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
