import numrWeb from 'numr-web/vite';

export default { plugins: [numrWeb()] };
