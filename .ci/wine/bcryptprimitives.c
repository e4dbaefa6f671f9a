// bcryptprimitives.dll for wine 8 (Debian 12), which has none: Go programs since Go 1.24 take
// their random bytes from its ProcessPrng and refuse to start without it. This one draws them
// from advapi32's RtlGenRandom (SystemFunction036), which wine has.
//
// Every Go program loads this DLL at start, so it also carries the one correction Go needs
// from wine 8's ntdll: NtSetInformationFile answers an information class it does not know
// (wine 8 lacks FileDispositionInformationEx, class 64) with STATUS_NOT_IMPLEMENTED, where
// Windows answers STATUS_INVALID_INFO_CLASS. Go ≥ 1.26 deletes files (os.Remove, os.RemoveAll,
// the t.TempDir cleanup) with class 64 first and falls back to the older
// FileDispositionInformation on STATUS_INVALID_INFO_CLASS, STATUS_INVALID_PARAMETER or
// STATUS_NOT_SUPPORTED only; wine's answer surfaced as "unlinkat ...: Invalid function." So the
// DLL points ntdll's export of NtSetInformationFile, which Go looks up at run time
// (GetProcAddress), at a wrapper that calls wine's function and turns STATUS_NOT_IMPLEMENTED
// into STATUS_INVALID_INFO_CLASS. Nothing else changes: callers that bound the export before
// (wine's own DLLs) keep calling wine directly, and a wine that implements the class is not
// affected.
#include <windows.h>
#include <winternl.h>
#include <string.h>

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

#define STATUS_NOT_IMPLEMENTED_ ((NTSTATUS)0xC0000002L)
#define STATUS_INVALID_INFO_CLASS_ ((NTSTATUS)0xC0000003L)

typedef NTSTATUS(NTAPI *set_information_file_fn)(HANDLE, PIO_STATUS_BLOCK, PVOID, ULONG, ULONG);
static set_information_file_fn wine_set_information_file;

static NTSTATUS NTAPI set_information_file(HANDLE h, PIO_STATUS_BLOCK io, PVOID info, ULONG len, ULONG class)
{
	NTSTATUS status = wine_set_information_file(h, io, info, len, class);
	return status == STATUS_NOT_IMPLEMENTED_ ? STATUS_INVALID_INFO_CLASS_ : status;
}

// near_page returns an executable page less than 2 GiB above the module at base, or NULL:
// an export is a 32-bit offset from its module's base, so the export must point there.
static BYTE *near_page(BYTE *base, DWORD image_size)
{
	SYSTEM_INFO si;
	GetSystemInfo(&si);
	ULONG_PTR step = si.dwAllocationGranularity;
	ULONG_PTR p = ((ULONG_PTR)base + image_size + step - 1) & ~(step - 1);
	ULONG_PTR end = (ULONG_PTR)base + 0x7fff0000;
	while (p < end) {
		MEMORY_BASIC_INFORMATION mbi;
		if (!VirtualQuery((void *)p, &mbi, sizeof mbi))
			return NULL;
		if (mbi.State == MEM_FREE) {
			void *page = VirtualAlloc((void *)p, si.dwPageSize, MEM_RESERVE | MEM_COMMIT, PAGE_EXECUTE_READWRITE);
			if (page)
				return page;
		}
		ULONG_PTR next = ((ULONG_PTR)mbi.BaseAddress + mbi.RegionSize + step - 1) & ~(step - 1);
		p = next > p ? next : p + step;
	}
	return NULL;
}

// hook_export points module's export name at hook, through a jump on a page near the module.
static BOOL hook_export(HMODULE module, const char *name, void *hook)
{
	BYTE *base = (BYTE *)module;
	IMAGE_NT_HEADERS *nt = (IMAGE_NT_HEADERS *)(base + ((IMAGE_DOS_HEADER *)base)->e_lfanew);
	IMAGE_DATA_DIRECTORY dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
	if (dir.VirtualAddress == 0)
		return FALSE;
	IMAGE_EXPORT_DIRECTORY *exports = (IMAGE_EXPORT_DIRECTORY *)(base + dir.VirtualAddress);
	DWORD *names = (DWORD *)(base + exports->AddressOfNames);
	WORD *ordinals = (WORD *)(base + exports->AddressOfNameOrdinals);
	DWORD *functions = (DWORD *)(base + exports->AddressOfFunctions);
	for (DWORD i = 0; i < exports->NumberOfNames; i++) {
		if (strcmp((const char *)(base + names[i]), name) != 0)
			continue;
		DWORD *slot = &functions[ordinals[i]];
		BYTE *thunk = near_page(base, nt->OptionalHeader.SizeOfImage);
		if (!thunk)
			return FALSE;
		// jmp *0(%rip); .quad hook
		thunk[0] = 0xff;
		thunk[1] = 0x25;
		memset(thunk + 2, 0, 4);
		memcpy(thunk + 6, &hook, sizeof hook);
		FlushInstructionCache(GetCurrentProcess(), thunk, 14);
		DWORD protect;
		if (!VirtualProtect(slot, sizeof *slot, PAGE_READWRITE, &protect))
			return FALSE;
		*slot = (DWORD)(thunk - base);
		VirtualProtect(slot, sizeof *slot, protect, &protect);
		return TRUE;
	}
	return FALSE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
	(void)instance;
	(void)reserved;
	if (reason == DLL_PROCESS_ATTACH && !wine_set_information_file) {
		HMODULE ntdll = GetModuleHandleA("ntdll.dll");
		if (ntdll) {
			// The wrapper reads wine_set_information_file, so it is set before the export
			// changes; if hooking fails the export stays wine's and the wrapper is never called.
			wine_set_information_file = (set_information_file_fn)(void (*)(void))GetProcAddress(ntdll, "NtSetInformationFile");
			if (wine_set_information_file)
				hook_export(ntdll, "NtSetInformationFile", (void *)set_information_file);
		}
	}
	return TRUE;
}
