// The body of the browser adapter's encoder (adapter_browser.py): every dispatch of one queue
// submit encoded in ONE call from Python, instead of a bind-group descriptor converted by to_js
// and four JS calls per dispatch. Parameters: device, queue, pipes (GPUComputePipeline[]),
// layouts (GPUBindGroupLayout[], one per pipeline), bufs (GPUBuffer[]), nums (Float64Array).
// nums holds, per dispatch: pipeline index, binding count, then (binding, buffer index, byte
// offset, byte size) per binding, then the three workgroup counts.
const enc = device.createCommandEncoder();
const pass = enc.beginComputePass();
let k = 0, d = 0, last = -1;
try {
  for (; k < nums.length; d++) {
    const p = nums[k], n = nums[k + 1];
    k += 2;
    const entries = new Array(n);
    for (let j = 0; j < n; j++, k += 4) {
      entries[j] = {binding: nums[k],
                    resource: {buffer: bufs[nums[k + 1]], offset: nums[k + 2], size: nums[k + 3]}};
    }
    const group = device.createBindGroup({layout: layouts[p], entries});
    if (p !== last) {
      pass.setPipeline(pipes[p]);
      last = p;
    }
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(nums[k], nums[k + 1], nums[k + 2]);
    k += 3;
  }
  pass.end();
  queue.submit([enc.finish()]);
} catch (e) {
  throw new Error("numr dispatch " + d + ": " + ((e && e.message) || e));
}
