#!/bin/bash
M=$1; shift
/work/scratch/s51/held3.sh 8a7a428 /tmp/wt4path $M property "$@"
/work/scratch/s51/held3.sh 8a7a428 /tmp/wt4path $M plant "$@"
/work/scratch/s51/held.sh 8a7a428 /tmp/wt4path $M "$@"
/work/scratch/s51/held2.sh 8a7a428 /tmp/wt4path $M utilities "$@"
/work/scratch/s51/held2.sh 8a7a428 /tmp/wt4path $M registrar "$@"
echo done > /work/scratch/s51/final-$M.done
