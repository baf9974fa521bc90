// bench/js.sh workload 1: hello world.
export default {
  fetch() {
    return new Response('hello world\n');
  },
};
