// What every kernel file needs and CUDA's headers would give: the kernel
// attributes and a grid-stride loop's first index and stride. Device code
// only (the .cu files compiled to PTX).
#pragma once

#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))

namespace gpudoctor::kernels {

__attribute__((device)) inline unsigned long long FirstIndex() {
  return static_cast<unsigned long long>(__nvvm_read_ptx_sreg_ctaid_x()) * __nvvm_read_ptx_sreg_ntid_x() +
         __nvvm_read_ptx_sreg_tid_x();
}

__attribute__((device)) inline unsigned long long Stride() {
  return static_cast<unsigned long long>(__nvvm_read_ptx_sreg_nctaid_x()) * __nvvm_read_ptx_sreg_ntid_x();
}

}  // namespace gpudoctor::kernels
