/* The bare syscall-to-LSTAR trip on this machine, with no forkvm code: a
 * VM whose CPL3 code runs `syscall` 20,000 times in a loop, LSTAR pointing
 * at a CPL3 `jmp *%rcx`, then one MMIO exit; each KVM_RUN is timed and
 * divided by 20,000 (the exit is noise at that count). `forkvm bench`'s
 * guest_syscall floor measures the same through forkvm's own VM set-up;
 * this program rules that set-up out.
 *
 *   gcc -O2 -o /tmp/pvm_trip bench/pvm/trip.c && /tmp/pvm_trip
 *   optional arguments: extra CR4 bits, SFMASK (hex), initial RFLAGS (hex)
 *
 * On the AMD EPYC PVM machines of 2026-12: median 2.6-3.1 us (forkvm's
 * floor: 2.7-3.3 us), not the 0.93 us ../shared/notes/pvm.md reports. */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#define MEM (4<<20)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void seg(struct kvm_segment*s,uint16_t sel,int code,int dpl){memset(s,0,sizeof *s);s->selector=sel;s->limit=0xfffff;s->g=1;s->present=1;s->s=1;s->dpl=dpl;s->type=code?11:3;s->l=code;s->db=code?0:1;}
int main(int argc,char**argv){
  int kvm=open("/dev/kvm",O_RDWR), vm=ioctl(kvm,KVM_CREATE_VM,0);
  uint8_t*m=mmap(0,MEM,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  struct kvm_userspace_memory_region r={0,0,0,MEM,(uint64_t)m};
  if(ioctl(vm,KVM_SET_USER_MEMORY_REGION,&r)){perror("slot");return 1;}
  uint64_t*pml4=(void*)(m+0x1000),*pdpt=(void*)(m+0x2000),*pd=(void*)(m+0x3000);
  pml4[0]=0x2000|7; pdpt[0]=0x3000|7; pd[0]=0|0x87|0x60; pd[1]=0x200000|0x87|0x60; pd[4]=0x800000|0x87|0x60;
  uint64_t*gdt=(void*)(m+0x500);
  gdt[2]=0x00af9b000000ffff; gdt[3]=0x00cf93000000ffff; gdt[4]=0x00cffb000000ffff; gdt[5]=0x00cff3000000ffff; gdt[6]=0x00affb000000ffff;
  uint8_t code[]={0xbb,0x20,0x4e,0,0, /*mov ebx,20000*/ 0x0f,0x05, 0xff,0xcb, 0x75,0xfa, /*loop*/
     0x88,0x04,0x25,0,0,0x80,0, /*mov [0x800000],al*/ 0xeb,0xe8};
  memcpy(m+0x10000,code,sizeof code);
  m[0x10800]=0xff; m[0x10801]=0xe1; /* jmp *rcx */
  int cpu=ioctl(vm,KVM_CREATE_VCPU,0);
  int sz=ioctl(kvm,KVM_GET_VCPU_MMAP_SIZE,0);
  struct kvm_run*run=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_SHARED,cpu,0);
  struct {struct kvm_cpuid2 c; struct kvm_cpuid_entry2 e[100];} cp={.c.nent=100};
  ioctl(kvm,KVM_GET_SUPPORTED_CPUID,&cp); ioctl(cpu,KVM_SET_CPUID2,&cp);
  struct kvm_sregs s; ioctl(cpu,KVM_GET_SREGS,&s);
  seg(&s.cs,0x33,1,3); seg(&s.ss,0x2b,0,3); s.ds=s.es=s.fs=s.gs=s.ss;
  s.gdt.base=0x500; s.gdt.limit=0x3f;
  s.cr0=0x80050033; s.cr3=0x1000; s.cr4=0x20|(argc>1?atoi(argv[1]):0); s.efer=0xd01;
  if(ioctl(cpu,KVM_SET_SREGS,&s)){perror("sregs");return 1;}
  struct {struct kvm_msrs h; struct kvm_msr_entry e[3];} ms={.h.nmsrs=3};
  ms.e[0].index=0xc0000081; ms.e[0].data=0x0023001000000000ULL;
  ms.e[1].index=0xc0000082; ms.e[1].data=0x10800;
  ms.e[2].index=0xc0000084; ms.e[2].data=argc>2?strtoul(argv[2],0,16):0x47700;
  if(ioctl(cpu,KVM_SET_MSRS,&ms)!=3){perror("msrs");return 1;}
  struct kvm_regs g={0}; g.rip=0x10000; g.rsp=0x300000; g.rflags=argc>3?strtoul(argv[3],0,16):0x202;
  ioctl(cpu,KVM_SET_REGS,&g);
  double best[200]; int n=0;
  for(int i=0;i<60;i++){double t=now(); if(ioctl(cpu,KVM_RUN,0)){perror("run");return 1;}
    double d=now()-t; if(run->exit_reason!=KVM_EXIT_MMIO){printf("exit %d\n",run->exit_reason);return 1;} if(i) best[n++]=d/20000;}
  for(int i=0;i<n;i++)for(int j=i+1;j<n;j++)if(best[j]<best[i]){double x=best[i];best[i]=best[j];best[j]=x;}
  printf("cr4+%s sfmask %s rflags %s: median %.3f us p10 %.3f\n",argc>1?argv[1]:"0",argc>2?argv[2]:"47700",argc>3?argv[3]:"202",best[n/2],best[n/10]);
}
